"""b01: a commit log with a segment deleted from its middle is read and committed onto.

What is wrong: delete one log segment that is not the last one (here the record of
the 2nd of 3 appends) from a stopped server's data dir, start a server: DoGet returns
the other appends' rows without a word (the deleted put's rows are silently gone,
its file becomes an "orphan"), and a new put commits seq 4 onto the gapped chain.
`quiver verify` does report chain_broken ("records 2 to 2 are missing").
Deleting the LAST segment instead is refused DATA_LOSS by reads and puts.

Contradicts: docs/protocol.md "Errors": DataLoss for "a commit log truncated,
corrupt ...; Run verify"; docs/format.md "Reads trust nothing ... It never silently
returns fewer rows" and "The hash chain": deleting any record breaks the chain, and a
server "refuses to read it or commit onto it (DATA_LOSS ...): a commit chained onto
... would erase the evidence". A gap is exactly such a damaged log, yet readers serve
it and writers extend it.

Severity: MEDIUM (tampering/loss of committed history goes unnoticed by every
reader and is built upon; only an explicit verify sees it).
Exits 1 while the bug is present, 0 when fixed (reads and puts answer DATA_LOSS).
"""
import glob, json, os, shutil, signal, socket, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt27/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
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

data = tempfile.mkdtemp(prefix="rt27-b01-")
port = free_port()
procs = []
try:
    p, c = start(data, port); procs.append(p)
    for k in "abc":
        put(c, k)
    p.send_signal(signal.SIGTERM); p.wait(30)
    segs = sorted(glob.glob(os.path.join(data, "p/q/.log/0*.ndjson")))
    assert len(segs) == 3, segs
    os.chmod(segs[1], 0o644); os.remove(segs[1])          # record 2 (put "b") deleted
    print("deleted", os.path.basename(segs[1]))
    p, c = start(data, port); procs.append(p)
    bad = False
    try:
        rows = c.do_get(fl.Ticket(b"p/q")).read_all().column("k").to_pylist()
        print("read answered", rows, "(put 'b' was acknowledged; no DATA_LOSS)")
        bad = True
    except fl.FlightError as e:
        print("read refused:", str(e)[:160])
    try:
        res = put(c, "d")
        print("put committed onto the gapped log: seq", res.get("seq"))
        bad = True
    except fl.FlightError as e:
        print("put refused:", str(e)[:160])
    print("BUG PRESENT" if bad else "ok: damaged log refused")
    sys.exit(1 if bad else 0)
finally:
    for p in procs:
        if p.poll() is None:
            p.kill(); p.wait()
    shutil.rmtree(data, ignore_errors=True)
