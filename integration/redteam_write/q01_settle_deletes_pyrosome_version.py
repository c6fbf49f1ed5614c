"""q01: sweep's manifest repair points the manifest BELOW the latest committed
version and then deletes that version (a pyrosome write) -- acknowledged rows lost.

What is wrong: a profile written by Quiver (v0, v1, recorded in the commit log)
and then by pyrosome's ParquetDal.write (v2; pyrosome's commit is its manifest
move, so the manifest said "v2" and pyrosome returned successfully). When
manifest.json is then lost (the case format.md "Sweep" names: "a deleted
manifest"), the start-up sweep of the next `quiver serve` writes the manifest
from the log as "v1" (backwards past the committed v2) and then removes v2 as a
"pyrosome write abandoned before its manifest move". pyrosome's acknowledged
rows are deleted from disk.

Promises contradicted: format.md "manifest.json": "The manifest never moves
backwards"; format.md "Sweep": "It never removes ... a numbered root file that
pyrosome's rule makes visible" and "It never removes what it cannot classify";
operations.md "Restore dot-files too" (a profile whose history the log does not
fully explain is left alone). A v2 beyond the log's newest write, holding
pyrosome data, cannot be told from a committed pyrosome write whose manifest was
lost, so sweep must not settle the manifest below it and must not delete it.
(Before this round a deleted manifest was DATA_LOSS and nothing was removed.)

Severity: HIGH (deletion of acknowledged rows by the automatic start-up sweep).
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
    raise RuntimeError("no free port in 19500-19599")

def start(data, port):
    p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if "serving" not in line:
        p.kill(); raise RuntimeError("server did not start: " + line)
    return p, fl.connect(f"grpc://127.0.0.1:{port}")

def stop(p):
    if p.poll() is None:
        p.terminate()
        try: p.wait(timeout=40)
        except subprocess.TimeoutExpired: p.kill(); p.wait()

def put(c, path, t, mode):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, "mode": mode})), t.schema)
    w.write_table(t); w.done_writing(); r.read(); w.close()

def main():
    base = tempfile.mkdtemp(prefix="rt33-q01-")
    data = os.path.join(base, "d"); os.mkdir(data)
    port = free_port()
    p = None
    try:
        p, c = start(data, port)
        put(c, "a/p", pa.table({"id": pa.array([0, 1, 2], pa.int64())}), "write")   # v0
        put(c, "a/p", pa.table({"id": pa.array([3, 4], pa.int64())}), "write")      # v1
        stop(p); p = None
        # pyrosome commits v2 (its manifest move succeeds)
        ParquetDal(data).write(pl.DataFrame({"id": [100, 101]}), "a", "p")
        prof = os.path.join(data, "a", "p")
        man = json.load(open(os.path.join(prof, "manifest.json")))
        print("manifest after pyrosome's write:", man)
        assert man["latest_data_dir"] == "v2"
        print("pyrosome reads:", sorted(ParquetDal(data).read("a", "p").collect()["id"].to_list()))
        # the manifest is lost; time passes (older than the start-up sweep's 1 h)
        os.remove(os.path.join(prof, "manifest.json"))
        old = time.time() - 7200
        for root, dirs, files in os.walk(os.path.join(prof, "v2")):
            for n in files + dirs:
                os.utime(os.path.join(root, n), (old, old), follow_symlinks=False)
        os.utime(os.path.join(prof, "v2"), (old, old))
        # restart: the start-up sweep runs
        p, c = start(data, port)
        time.sleep(3)
        listing = sorted(os.listdir(prof))
        man2 = open(os.path.join(prof, "manifest.json")).read() if os.path.exists(os.path.join(prof, "manifest.json")) else None
        print("after restart: profile dir holds", listing, "manifest:", man2 and json.loads(man2))
        v2_there = os.path.isdir(os.path.join(prof, "v2")) and any(
            f.endswith(".parquet") for f in os.listdir(os.path.join(prof, "v2")))
        try:
            rows = sorted(fl.connect(f"grpc://127.0.0.1:{port}").do_get(fl.Ticket(b"a/p")).read_all()["id"].to_pylist())
            print("Quiver reads a/p:", rows)
        except Exception as ex:
            print("Quiver read a/p:", type(ex).__name__, str(ex)[:200])
        if not v2_there:
            print("BUG: pyrosome's committed v2 (rows 100, 101) was deleted by the start-up sweep")
            return 1
        if man2 and json.loads(man2)["latest_data_dir"] != "v2":
            print("BUG: manifest written below the committed v2 (pyrosome's rows hidden)")
            return 1
        print("OK: pyrosome's v2 kept")
        return 0
    finally:
        if p: stop(p)
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
