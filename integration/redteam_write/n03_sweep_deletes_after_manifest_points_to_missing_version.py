"""n03: manifest pointed at a version that does not exist (with .log and
.quiver.kind deleted): verify says ok, reads say NotFound, and sweep deletes every
version of the profile, all acknowledged rows.

What is wrong: round 29's m02 fix made sweep skip a profile "whose manifest names a
version Quiver wrote (.version.json) that no record lists", and verify report it
chain_broken. Point the manifest instead at a version that is not there
({"latest_data_dir": "v5"}) and the check is bypassed:
  * a fresh server answers NOT_FOUND "a/p has no version v5" (protocol.md Errors:
    "a manifest naming an uncommitted version" is DATA_LOSS; format.md: "a deleted
    manifest.json or .version.json of a Quiver version ... is DATA_LOSS");
  * verify reports ok: true with no problem at all, although v0 and v1 hold Quiver's
    .version.json, claims and data files (footers with quiver.schema_version);
  * sweep (online with a fresh server, or offline `quiver sweep`) removes v0 and v1
    entirely: every acknowledged put is gone, and verify stays clean afterwards.
Severity: MEDIUM (same class as round 29 m02: metadata-only tampering turns into
silent, unrecoverable deletion of acknowledged data by the maintenance tool).
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

d = tempfile.mkdtemp(prefix="rt30-n03-", dir="/tmp")
p = None
bug = False
try:
    p, c = start(d)
    t = pa.table({"id": [1, 2, 3]})
    for mode in ("append", "append", "write", "append"):
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "a/p", "mode": mode})), t.schema)
        w.write_table(t); w.done_writing(); r.read(); w.close()
    stop(p)
    pd = os.path.join(d, "a", "p")
    shutil.rmtree(os.path.join(pd, ".log"))
    os.remove(os.path.join(pd, ".quiver.kind"))
    with open(os.path.join(pd, "manifest.json"), "w") as f:
        f.write(json.dumps({"latest_data_dir": "v5"}, indent=4))
    before = [f for f in files(pd) if f.endswith(".parquet")]
    print("acknowledged data files:", before)
    p, c = start(d)
    try:
        n = c.do_get(fl.Ticket(b'{"path": "a/p"}')).read_all().num_rows
        print("fresh read: %d rows, no error (6 acknowledged in latest)" % n)
        if n != 6:
            bug = True
    except Exception as e:
        print("fresh read refused:", type(e).__name__, str(e).splitlines()[0][:200])
        if not isinstance(e, fl.FlightInternalError) or "data loss" not in str(e):
            print("  (expected DATA_LOSS)")
    v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", b"{}"))][0]
    print("verify: ok=%s kinds=%s" % (v["ok"], sorted({pr["kind"] for pr in v["problems"]})))
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
