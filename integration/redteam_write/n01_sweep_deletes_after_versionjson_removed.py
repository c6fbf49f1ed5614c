"""n01: sweep deletes every acknowledged file of a profile whose .log, .quiver.kind
and the manifest-named version's .version.json were deleted.

What is wrong: round 29's m02 fix makes sweep skip a profile "whose manifest names
a version Quiver wrote (.version.json) that no record lists" and verify report it
chain_broken. Deleting that version's .version.json as well (three metadata files,
no data file touched) makes the version look pyrosome-written, so:
  * a fresh server reads the profile as 0 rows, without an error (format.md:
    "Reads trust nothing ... never silently returns fewer rows"; "A deleted
    manifest.json or .version.json of a Quiver version ... is DATA_LOSS, not an
    empty read");
  * verify reports only `orphan`s, no `chain_broken`;
  * sweep {"older_than_s": 0} (and offline `quiver sweep`) removes every data
    file of the acknowledged puts (format.md "Sweep": touches nothing in a profile
    whose manifest names a version Quiver wrote that no record lists). The data files'
    footers carry quiver.schema_version and the version's claims are Quiver's, so the
    server knows Quiver wrote this version.
Severity: MEDIUM (same class as round 29's m02: tampering with metadata turns a
recoverable situation into silent, unrecoverable loss of acknowledged rows).
Exit 1 while the bug is present, 0 when fixed.
"""
import os, sys, json, time, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt30/quiver")

def freeport():
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")

PORT = int(os.environ.get("PORT") or freeport())

def start(d):
    p = subprocess.Popen(["nice", "-n", "10", Q, "serve", "--addr", f"127.0.0.1:{PORT}", "--data-dir", d],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.readline()
    return p, fl.connect(f"grpc://127.0.0.1:{PORT}")

def stop(p):
    if p.poll() is None:
        p.terminate(); p.wait(30)

def files(d):
    return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)

d = tempfile.mkdtemp(prefix="rt30-n01-", dir="/tmp")
p = None
bug = False
try:
    p, c = start(d)
    t = pa.table({"id": [1, 2, 3]})
    for _ in range(2):
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "a/p"})), t.schema)
        w.write_table(t); w.done_writing(); r.read(); w.close()
    stop(p)
    pd = os.path.join(d, "a", "p")
    shutil.rmtree(os.path.join(pd, ".log"))
    os.remove(os.path.join(pd, ".quiver.kind"))
    os.remove(os.path.join(pd, "v0", ".version.json"))
    before = [f for f in files(pd) if f.endswith(".parquet")]
    print("acknowledged data files:", before)
    p, c = start(d)
    try:
        n = c.do_get(fl.Ticket(b'{"path": "a/p"}')).read_all().num_rows
        print("fresh read: %d rows, no error (6 acknowledged)" % n)
        if n != 6:
            bug = True
    except fl.FlightError as e:
        print("fresh read refused:", str(e).splitlines()[0][:200])
    v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", b"{}"))][0]
    print("verify kinds:", sorted({pr["kind"] for pr in v["problems"]}))
    sw = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("sweep", b'{"older_than_s": 0}'))][0]
    print("sweep:", json.dumps(sw)[:400])
    after = [f for f in files(pd) if f.endswith(".parquet")]
    print("data files left:", after)
    if after != before:
        bug = True
finally:
    if p is not None:
        stop(p)
    shutil.rmtree(d, ignore_errors=True)
print("BUG PRESENT" if bug else "OK")
sys.exit(1 if bug else 0)
