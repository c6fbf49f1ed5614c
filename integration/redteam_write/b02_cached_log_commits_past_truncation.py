"""b02: a running server commits onto (and vouches from) a log whose last record was deleted.

What is wrong: with a server running, delete the profile's last log segment (the
record of put "b"; .log/HEAD still names it). A fresh server answers every read and
put DATA_LOSS ("the commit log ends at record 1 but its head says 2"), as documented.
The running server instead (1) answers a retry of put "b" (same request id) with the
deleted record, i.e. acknowledges a put the log no longer holds, (2) serves a read
with b's rows, and (3) commits a new put as seq 3 onto the truncated log and rewrites
HEAD, replacing the head that proved the truncation: afterwards a fresh server no
longer refuses the profile and silently serves it without b (see also b01), while
the retry of "b" through the fresh server commits it again as a new record.

Contradicts: docs/format.md "The hash chain": "a log whose last records were deleted
ends before its HEAD ... A server reading such a log refuses to read it or commit onto
it (DATA_LOSS ...): a commit chained onto a rewritten last record, and its HEAD then
replaced, would erase the evidence"; format.md "Idempotent puts": a request id is
answered from "the profile's log".  The running server trusts its in-memory copy of
the log (the request-id lookup and the commit only read past the last segment it knows).

Severity: LOW-MEDIUM (needs the log altered under a running server; the evidence the
head is kept for is overwritten and an acknowledged-but-unlogged put results).
Exits 1 while the bug is present, 0 when fixed.
"""
import glob, json, os, shutil, signal, socket, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt27/quiver")

def free_ports(n):
    if os.environ.get("PORT"):
        # PORT is free; PORT+1 need not be (the test harness hands out an
        # ephemeral port, whose neighbour a client connection may hold):
        # the others are ports the system gives free.
        out = [int(os.environ["PORT"])]
        for _ in range(n - 1):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0)); out.append(s.getsockname()[1])
        return out
    out = []
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); out.append(p)
        except OSError:
            s.close()
        if len(out) == n:
            return out
    raise SystemExit("no free port")

def start(data, port):
    p = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if b"serving" not in p.stdout.readline():
        p.kill(); raise SystemExit("server did not start")
    return p, fl.connect(f"grpc://127.0.0.1:{port}")

def put(c, key):
    t = pa.table({"k": [key], "n": [0]})
    cmd = {"path": "p/q", "request_id": key}
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), t.schema)
    w.write_table(t); w.done_writing(); buf = r.read()
    if buf is None:  # the server answered with an error: close raises it
        w.close()
        raise fl.FlightError("the put had no answer")
    res = json.loads(buf.to_pybytes()); w.close()
    return res

data = tempfile.mkdtemp(prefix="rt27-b02-")
pa_, pb_ = free_ports(2)
procs = []
try:
    p, c = start(data, pa_); procs.append(p)
    put(c, "a"); put(c, "b")
    segs = sorted(glob.glob(os.path.join(data, "p/q/.log/0*.ndjson")))
    os.chmod(segs[-1], 0o644); os.remove(segs[-1])          # record 2 (put "b") deleted
    print("deleted", os.path.basename(segs[-1]), "HEAD:", open(os.path.join(data, "p/q/.log/HEAD")).read())
    bad = []
    try:
        r = put(c, "b"); bad.append("retry of 'b' acknowledged with the deleted record seq %s" % r.get("seq"))
    except fl.FlightError as e:
        print("retry b refused:", str(e)[:140])
    try:
        rows = c.do_get(fl.Ticket(b"p/q")).read_all().column("k").to_pylist()
        print("note: read answered %s (served from the server's cached log; not counted)" % rows)
    except fl.FlightError as e:
        print("read refused:", str(e)[:140])
    try:
        r = put(c, "c"); bad.append("new put committed onto the truncated log as seq %s" % r.get("seq"))
    except fl.FlightError as e:
        print("put c refused:", str(e)[:140])
    for b in bad: print("BUG:", b)
    # what a fresh server sees afterwards
    p2, c2 = start(data, pb_); procs.append(p2)
    try:
        print("fresh server read:", c2.do_get(fl.Ticket(b"p/q")).read_all().column("k").to_pylist())
    except fl.FlightError as e:
        print("fresh server read refused:", str(e)[:140])
    sys.exit(1 if bad else 0)
finally:
    for p in procs:
        if p.poll() is None:
            p.kill(); p.wait()
    shutil.rmtree(data, ignore_errors=True)
