"""q03: what a kill -9 during retention (`gc`) leaves of a retired version is not
removed by the start-up sweep when it includes a pyrosome file, so `verify`
keeps reporting it.

Scenario: a Quiver profile; pyrosome's ParquetDal.append adds v0/1.parquet;
Quiver writes v1; `remove-old-versions keep=1 grace=0` retires v0 (its
`retire` record is in the log) and the server is killed while deleting the
directory, leaving v0/.version.json and pyrosome's v0/1.parquet (simulated
deterministically: the two files are put back, with their original mtimes,
after the retention ran). Observed in a real kill -9 loop too.

Promise contradicted: format.md "Sweep": sweep removes "at any age, what is
left of retired versions"; operations.md / format.md: "the start-up sweep so
leaves nothing of a kill -9 for verify to report". Observed: after a restart
the start-up sweep leaves v0 in place and `verify` reports `orphan c/p/v0`
(an explicit `sweep --older-than 0s` does remove it, so the age rule is wrongly
applied to a retired version's pyrosome file).

Severity: LOW (leftover files and a non-clean verify after a crash; no data loss).
Exit 1 while the bug is present, 0 when fixed.
"""
import json, os, shutil, socket, subprocess, sys, tempfile, time, random
import pyarrow as pa, pyarrow.flight as fl, polars as pl
from pyrosome.dal import ParquetDal

QUIVER = os.environ.get("QUIVER", "/work/rtrun/rt33/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    ps = list(range(19500, 19600)); random.shuffle(ps)
    for p in ps:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise RuntimeError("no free port")

def start(data, port):
    p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if "serving" not in p.stdout.readline():
        p.kill(); raise RuntimeError("server did not start")
    return p, fl.connect(f"grpc://127.0.0.1:{port}")

def put(c, path, t, mode):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, "mode": mode})), t.schema)
    w.write_table(t); w.done_writing(); r.read(); w.close()

def main():
    base = tempfile.mkdtemp(prefix="rt33-q03-")
    data = os.path.join(base, "d"); os.mkdir(data)
    save = os.path.join(base, "save"); os.mkdir(save)
    port = free_port(); p = None
    try:
        p, c = start(data, port)
        put(c, "c/p", pa.table({"id": pa.array([0, 1, 2], pa.int64())}), "write")   # v0
        ParquetDal(data).append(pl.DataFrame({"id": [7]}), "c", "p")                  # v0/1.parquet by pyrosome
        put(c, "c/p", pa.table({"id": pa.array([3, 4], pa.int64())}), "write")        # v1
        v0 = os.path.join(data, "c", "p", "v0")
        for n in (".version.json", "1.parquet"):
            shutil.copy2(os.path.join(v0, n), os.path.join(save, n))
        res = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action(
            "remove-old-versions", json.dumps({"path": "c/p", "keep": 1, "grace_s": 0}).encode()))]
        print("retention:", res)
        p.kill(); p.wait(); p = None          # kill -9
        # what a kill -9 in the middle of the directory's deletion leaves
        os.makedirs(v0, exist_ok=True)
        for n in (".version.json", "1.parquet"):
            shutil.copy2(os.path.join(save, n), os.path.join(v0, n))
        p, c = start(data, port)              # start-up sweep runs
        time.sleep(3)
        print("after restart, v0 holds:", sorted(os.listdir(v0)) if os.path.isdir(v0) else "(gone)")
        r = subprocess.run([QUIVER, "verify", "--json", "--server", f"127.0.0.1:{port}"],
                           capture_output=True, text=True)
        rep = json.JSONDecoder().raw_decode(r.stdout.strip())[0]
        print("verify problems:", rep["problems"])
        rows = sorted(c.do_get(fl.Ticket(b"c/p")).read_all()["id"].to_pylist())
        print("rows:", rows)
        if os.path.isdir(v0) or rep["problems"]:
            print("BUG: the retired version's leftovers survived the start-up sweep; verify is not clean")
            return 1
        print("OK")
        return 0
    finally:
        if p and p.poll() is None:
            p.terminate(); p.wait(timeout=40)
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
