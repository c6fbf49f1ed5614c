"""n06: after round 29's m02 tampering (.log and .quiver.kind deleted), a fresh server
refuses reads and compaction with DATA_LOSS, but still accepts a put: the put starts
a brand-new commit log at seq 1 (as a new version), after which the tampering is no
longer detected, verify is clean and sweep deletes every earlier version with all the
acknowledged rows.

What is wrong: format.md "The hash chain": for a log that lost records "a server
refuses to read the profile or commit onto it (DATA_LOSS ...) so that no acknowledged
commit's rows are left out without a word"; protocol.md Errors: DATA_LOSS for "a
commit log truncated ... a manifest naming an uncommitted version". Round 28's l01
fixed the same thing for retention ("with .log deleted too, it started a new log").
Observed: get -> DATA_LOSS "the manifest names v1, which has no commit record",
compact -> DATA_LOSS, yet an append is acknowledged (record seq 1, a new version);
the manifest then names a recorded version, so the m02 guard no longer fires:
verify reports no chain_broken and sweep {"older_than_s": 0} (fresh server) removes
v0 and v1.
Severity: MEDIUM (one ordinary put after the tampering turns detected damage into
silent, permanent loss of every acknowledged row of the profile).
Exit 1 while the bug is present, 0 when fixed.
"""
import os, sys, json, socket, subprocess, tempfile, shutil
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

def put(c, t, mode="append"):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "a/p", "mode": mode})), t.schema)
    w.write_table(t); w.done_writing()
    res = json.loads(r.read().to_pybytes()); w.close()
    return res

def act(c, name, body):
    return [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action(name, json.dumps(body).encode()))][0]

d = tempfile.mkdtemp(prefix="rt30-n06-", dir="/tmp")
p = None
bug = False
try:
    p, c = start(d)
    t = pa.table({"id": [1, 2, 3]})
    for mode in ("append", "append", "write", "append"):
        put(c, t, mode)
    stop(p)
    pd = os.path.join(d, "a", "p")
    shutil.rmtree(os.path.join(pd, ".log"))
    os.remove(os.path.join(pd, ".quiver.kind"))
    before = sorted(os.path.join(v, f) for v in ("v0", "v1") for f in os.listdir(os.path.join(pd, v)) if f.endswith(".parquet"))
    print("acknowledged data files:", before)
    p, c = start(d)
    try:
        c.do_get(fl.Ticket(b'{"path": "a/p"}')).read_all()
        print("read: served")
    except Exception as e:
        print("read refused:", str(e).split(". gRPC")[0][:160])
    try:
        res = put(c, pa.table({"id": [9]}))
        print("put after tampering ACKNOWLEDGED: version %s seq %s" % (res["version"], res.get("seq")))
        bug = True
    except Exception as e:
        print("put refused:", str(e).split(". gRPC")[0][:160])
    stop(p)
    p, c = start(d)          # fresh server: sweep
    v = act(c, "verify", {})
    print("verify: ok=%s kinds=%s" % (v["ok"], sorted({x["kind"] for x in v["problems"]})))
    print("sweep:", json.dumps(act(c, "sweep", {"older_than_s": 0}))[:300])
    after = sorted(os.path.join(v, f) for v in ("v0", "v1") if os.path.isdir(os.path.join(pd, v))
                   for f in os.listdir(os.path.join(pd, v)) if f.endswith(".parquet"))
    print("acknowledged data files left:", after)
    if after != before:
        bug = True
finally:
    if p is not None:
        stop(p)
    shutil.rmtree(d, ignore_errors=True)
print("BUG PRESENT" if bug else "OK")
sys.exit(1 if bug else 0)
