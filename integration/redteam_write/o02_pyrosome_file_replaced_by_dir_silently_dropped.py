#!/usr/bin/env python3
"""o02: in a pyrosome-written version, a numbered data file replaced by a directory (or a FIFO) is
silently left out of reads: the read succeeds with fewer rows.

What is wrong: pyrosome's ParquetDal writes v0 (0.parquet, 2 rows) and appends 1.parquet (1 row) and
2.parquet (1 row).  Quiver serves [1, 2, 3, 4].  Then `v0/1.parquet` is replaced by a directory of the
same name (holding the original file inside) -- or by a named pipe.  `quiver get` then succeeds and
returns [1, 2, 4]: one acknowledged row is missing without any error.  (A symbolic link in the same
place does fail the read with DATA_LOSS, as the new rule promises; a directory or special file does not.)

Contradicts: format.md "Symbolic links": "A link with a data file's name in a committed version (even
one pyrosome wrote, which no record lists) fails reads with DATA_LOSS: its name is data by pyrosome's
rule, and leaving it out would return fewer rows"; format.md "Reads trust nothing ... It never silently
returns fewer rows"; protocol.md DataLoss: "a committed file missing, resized, re-hashed or replaced by
a link, directory or special file".  A name `N.parquet` at a version root is data by pyrosome's rule
whatever kind of entry holds it.

Severity: MEDIUM (tampering needed; silent short read).
Exit 1 while the bug is present, 0 when fixed.
"""
import os, subprocess, tempfile, time, socket, shutil, sys
import pyarrow.parquet as pq
import polars as pl
import pyrosome

Q = os.environ.get("QUIVER", "/work/rtrun/rt31/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")

def main():
    d = tempfile.mkdtemp(prefix="rt31-o02-", dir="/tmp")
    tmp = tempfile.mkdtemp(prefix="rt31-o02in-", dir="/tmp")
    port = free_port()
    srv = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", d],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close(); break
            except OSError:
                time.sleep(0.1)
        n = [0]
        def get():
            n[0] += 1
            out = os.path.join(tmp, f"o{n[0]}.parquet")
            r = subprocess.run([Q, "get", "p/q", "-o", out, "--server", f"127.0.0.1:{port}"],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                return None, (r.stdout + r.stderr).strip()
            return sorted(pq.read_table(out).column("id").to_pylist()), ""
        dal = pyrosome.ParquetDal(d)
        dal.write(pl.DataFrame({"id": [1, 2]}), "p", "q")
        dal.append(pl.DataFrame({"id": [3]}), "p", "q")
        dal.append(pl.DataFrame({"id": [4]}), "p", "q")
        rows, err = get()
        print("before tampering:", rows, err)
        if rows != [1, 2, 3, 4]:
            print("unexpected setup"); return 2
        vd = os.path.join(d, "p", "q", "v0")
        keep = os.path.join(tmp, "saved.parquet")
        os.rename(os.path.join(vd, "1.parquet"), keep)
        bad = False
        # 1) a directory in the data file's place
        os.mkdir(os.path.join(vd, "1.parquet"))
        shutil.copy(keep, os.path.join(vd, "1.parquet", "0.parquet"))
        rows, err = get()
        print("1.parquet is a directory:", rows if rows is not None else "error: " + err)
        if rows is not None:
            print("BUG: read succeeded and silently left out the rows of v0/1.parquet")
            bad = True
        shutil.rmtree(os.path.join(vd, "1.parquet"))
        # 2) a named pipe in the data file's place
        os.mkfifo(os.path.join(vd, "1.parquet"))
        rows, err = get()
        print("1.parquet is a FIFO:", rows if rows is not None else "error: " + err)
        if rows is not None:
            print("BUG: read succeeded and silently left out the rows of v0/1.parquet")
            bad = True
        os.remove(os.path.join(vd, "1.parquet"))
        # control: a symbolic link is refused (rule of this round)
        os.symlink(keep, os.path.join(vd, "1.parquet"))
        rows, err = get()
        print("control, 1.parquet is a symlink:", rows if rows is not None else "error: " + err)
        return 1 if bad else 0
    finally:
        if srv.poll() is None:
            srv.kill(); srv.wait()
        shutil.rmtree(d, ignore_errors=True); shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
