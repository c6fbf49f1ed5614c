"""n04: round 29's m02 tampering (.log and .quiver.kind deleted) still makes sweep
delete acknowledged data when the profile's latest version was written by pyrosome.

What is wrong: a profile created by Quiver (v0: two acknowledged puts) and then given
a new version by pyrosome's ParquetDal.write (v1, no .version.json: a documented
interoperation, format.md "Versions"). Delete .log and .quiver.kind (exactly m02's
tampering). The m02 fix only looks at the version the manifest names; v1 is
pyrosome's, so:
  * verify (fresh server) reports no chain_broken and nothing about v0 at all;
  * a read of version v0 answers NOT_FOUND "v0 was never committed" instead of
    DATA_LOSS (protocol.md Errors: a commit log truncated ... is DATA_LOSS);
  * sweep {"older_than_s": 0} removes v0 whole, with both acknowledged puts' files.
format.md "Sweep" promises it touches nothing "in a profile whose manifest names a
version Quiver wrote that no record lists (the log was removed ...)"; here the log
was removed just the same, and v0/.version.json plus Quiver-stamped data files
(quiver.schema_version in the footers) show Quiver wrote and committed it.
Severity: MEDIUM-LOW (needs the log deleted; what is lost is a superseded but
unretired version, readable by version until the sweep).
Exit 1 while the bug is present, 0 when fixed.
"""
import os, sys, json, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl
import polars as pl
from pyrosome.dal import ParquetDal

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

d = tempfile.mkdtemp(prefix="rt30-n04-", dir="/tmp")
p = None
bug = False
try:
    p, c = start(d)
    t = pa.table({"id": [1, 2, 3]})
    for _ in range(2):
        w, r = c.do_put(fl.FlightDescriptor.for_path("a", "p"), t.schema)
        w.write_table(t); w.done_writing(); r.read(); w.close()
    stop(p)
    ParquetDal(d).write(pl.DataFrame({"id": [7]}), "a", "p")     # pyrosome's new version v1
    pd = os.path.join(d, "a", "p")
    shutil.rmtree(os.path.join(pd, ".log"))
    os.remove(os.path.join(pd, ".quiver.kind"))
    before = sorted(f for f in os.listdir(os.path.join(pd, "v0")) if f.endswith(".parquet"))
    print("v0 data files (2 acknowledged puts):", before)
    p, c = start(d)
    try:
        n = c.do_get(fl.Ticket(b'{"path": "a/p", "version": "v0"}')).read_all().num_rows
        print("read v0: %d rows" % n)
    except Exception as e:
        print("read v0 refused:", str(e).split(". gRPC")[0][:200])
    v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", b"{}"))][0]
    print("verify problems:", [(x["kind"], x["path"]) for x in v["problems"]])
    sw = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("sweep", b'{"older_than_s": 0}'))][0]
    print("sweep:", json.dumps(sw)[:400])
    v0 = os.path.join(pd, "v0")
    after = sorted(f for f in os.listdir(v0) if f.endswith(".parquet")) if os.path.isdir(v0) else []
    print("v0 data files left:", after)
    if after != before:
        bug = True
finally:
    if p is not None:
        stop(p)
    shutil.rmtree(d, ignore_errors=True)
print("BUG PRESENT" if bug else "OK")
sys.exit(1 if bug else 0)
