"""r21: a Quiver put into a pyrosome profile nested below another pyrosome profile
is accepted and acknowledged, but its committed file is never audited afterwards.

Steps (no tampering until the last step): pyrosome's ParquetDal writes profile `a`
and then profile `a/b` (pyrosome allows a profile below another). Quiver then accepts
an append to `a/b` (it commits a record in a/b/.log). format.md says "No profile above
or below another ... Directories made before markers existed (and by pyrosome) are
checked by their contents: a manifest above" -- so the put should be refused as a
nested profile -- or, once acknowledged, verify must audit it ("mutated": a file a
record lists has another SHA-256). Observed: the put is acknowledged, `verify` reports
`a/b` only as `unknown` with checked_files 0, and after one byte of the acknowledged
file is changed (same size) verify still reports no `mutated` and reads serve it.

Severity: LOW-MEDIUM (an acknowledged commit escapes verification; verify does not say
ok because of the `unknown` entry, but it never names the damaged file).
Exit 1 while the bug is present, 0 when fixed (put refused, or damage reported).
"""
import os, sys, json, time, socket, subprocess, shutil, tempfile
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq
import polars as pl, pyrosome

QUIVER = os.environ.get("QUIVER", "/work/rtrun/rt35/quiver")

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

def main():
    base = tempfile.mkdtemp(prefix="rt35-r21-", dir="/tmp")
    d = os.path.join(base, "data"); os.mkdir(d)
    port = free_port()
    proc = None
    try:
        dal = pyrosome.ParquetDal(d)
        dal.write(pl.DataFrame({"id": [1, 2]}), "a")
        dal.write(pl.DataFrame({"id": [10]}), "a", "b")
        proc = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", d],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c = None
        for _ in range(200):
            try:
                c = fl.connect(f"grpc://127.0.0.1:{port}"); list(c.list_actions()); break
            except Exception:
                c = None; time.sleep(0.05)
        if c is None:
            print("server did not start"); return 2
        t = pa.table({"id": pa.array([20, 21, 22], pa.int64())})
        try:
            w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "a/b"})), t.schema)
            w.write_table(t); w.done_writing()
            buf = r.read(); w.close()
            res = json.loads(buf.to_pybytes())
        except Exception as e:
            print("put to a/b refused:", str(e).splitlines()[0][:200])
            print("FIXED (nested profile refused)")
            return 0
        print("put to a/b acknowledged:", res["version"], [f["path"] for f in res["files"]])
        rel = res["files"][0]["path"]
        f = os.path.join(d, "a", "b", rel)
        print("read a/b:", c.do_get(fl.Ticket(b'{"path":"a/b"}')).read_all()["id"].to_pylist())
        v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", b"{}"))][0]
        print("verify before damage: checked_files", v["checked_files"], [(p["kind"], p["path"]) for p in v["problems"]])
        # damage: change values of the acknowledged file, keep size (rewrite same-size parquet)
        os.chmod(f, 0o644)
        data = bytearray(open(f, "rb").read())
        orig = bytes(data)
        tbl = pq.read_table(f)
        # flip one byte inside the data pages region (before the footer)
        i = 8
        data[i] ^= 0x01
        open(f, "wb").write(bytes(data))
        v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", b"{}"))][0]
        probs = [(p["kind"], p["path"]) for p in v["problems"]]
        print("verify after damage: checked_files", v["checked_files"], probs)
        reported = any(k in ("mutated", "missing") and p.endswith(rel.split("/")[-1]) for k, p in probs)
        if reported:
            print("FIXED: damage to the acknowledged file is reported")
            return 0
        print("BUG: an acknowledged Quiver commit in a/b is never audited; its damage goes unreported")
        return 1
    finally:
        if proc is not None:
            proc.kill(); proc.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
