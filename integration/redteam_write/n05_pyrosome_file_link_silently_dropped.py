"""n05: a pyrosome-written data file replaced by a symbolic link is silently left out
of reads (fewer rows, no error), while the same link in place of the version
directory or the manifest is DATA_LOSS.

What is wrong: a pyrosome profile (ParquetDal.write + append: v0/0.parquet and
v0/1.parquet, 4 rows). Replace v0/1.parquet by a symbolic link to an identical copy
(or anywhere). Quiver serves the profile with 3 rows and no error; only verify
mentions a `link`. format.md "Symbolic links": the storage layer "refuses any
symbolic link on the way, for every operation"; round 29 m03 made a linked version
directory, .version.json or manifest DATA_LOSS ("storage altered"), and format.md
"Reads trust nothing ... never silently returns fewer rows". pyrosome's files are
visible data under the pyrosome rule ("its own appends are served"), so a link where
one of them was is storage altered too, yet the read silently drops its rows.
Severity: LOW (needs write access to the data dir; verify does report the link).
Exit 1 while a read returns fewer rows without an error, 0 when it is refused or
returns all 4 rows.
"""
import os, sys, json, socket, subprocess, tempfile, shutil
import pyarrow.flight as fl
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
d = tempfile.mkdtemp(prefix="rt30-n05-", dir="/tmp")
p = None
bug = False
try:
    dal = ParquetDal(d)
    dal.write(pl.DataFrame({"id": [1, 2, 3]}), "py", "z")
    dal.append(pl.DataFrame({"id": [4]}), "py", "z")
    f = os.path.join(d, "py", "z", "v0", "1.parquet")
    shutil.copy(f, os.path.join(d, "py", "z", "v0", "1.parquet_bak"))
    os.remove(f)
    os.symlink("1.parquet_bak", f)
    p = subprocess.Popen(["nice", "-n", "10", Q, "serve", "--addr", f"127.0.0.1:{PORT}", "--data-dir", d],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.readline()
    c = fl.connect(f"grpc://127.0.0.1:{PORT}")
    try:
        n = c.do_get(fl.Ticket(b'{"path": "py/z"}')).read_all().num_rows
        print("read py/z: %d rows, no error (pyrosome wrote 4)" % n)
        if n != 4:
            bug = True
    except Exception as e:
        print("read refused:", str(e).split(". gRPC")[0][:200])
    v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", b"{}"))][0]
    print("verify problems:", [(x["kind"], x["path"]) for x in v["problems"]])
finally:
    if p is not None and p.poll() is None:
        p.terminate(); p.wait(30)
    shutil.rmtree(d, ignore_errors=True)
print("BUG PRESENT" if bug else "OK")
sys.exit(1 if bug else 0)
