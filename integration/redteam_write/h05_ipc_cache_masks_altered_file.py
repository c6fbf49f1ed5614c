#!/usr/bin/env python3
"""h05 (MEDIUM): with --cache-dir, a committed Parquet file altered in place (same size,
another row count, modification time restored as `touch -r` / `cp --preserve` do) keeps
being served from the IPC cache: the read returns the old 1000 rows and never fails, while
a server without the cache answers DATA_LOSS ("holds 10 rows, its commit record says 1000").
operations.md promises "a file altered in place has another key and is read - and checked -
from its bytes"; format.md "Reads trust nothing": another number of rows -> DATA_LOSS.
The cache key uses the mtime (settable by anyone who can write the file) instead of
something the writer cannot restore (ctime, as the new footer cache does).
Exit 0 = bug absent (DATA_LOSS), 1 = bug present (rows served)."""
import os, re, io, sys, json, struct, hashlib, tempfile, subprocess
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))
BASE = None

def start(d, *args):
    err = tempfile.NamedTemporaryFile("w+", delete=False, dir="/tmp", prefix="h05err")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0", *args], stdout=subprocess.PIPE, stderr=err, text=True)
    return p, fl.connect("grpc://" + re.search(r"on (\S+)$", p.stdout.readline().strip()).group(1)), err.name

def main():
    d = tempfile.mkdtemp(dir=BASE, prefix="h05data")
    cache = tempfile.mkdtemp(dir=BASE, prefix="h05cache")
    p, c, errf = start(d, "--cache-dir", cache, "--group-append-bytes", "0")
    N = 1000
    t = pa.table({"a": pa.array(range(N), pa.int64()),
                  "s": pa.array([hashlib.sha256(b"%d" % i).hexdigest() for i in range(N)])})
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "p"})), t.schema)
    w.write_table(t); w.done_writing(); res = json.loads(r.read().to_pybytes()); w.close()
    f = os.path.join(d, "p", res["files"][0]["path"]); size = os.path.getsize(f)
    c.do_get(fl.Ticket(b"p")).read_all()          # fills the IPC cache
    # a valid Parquet file of the same size holding 10 other rows
    tb = pa.table({"a": pa.array(range(5000, 5010), pa.int64()), "s": pa.array(["y%d" % i for i in range(10)])})
    buf = io.BytesIO(); pq.write_table(tb, buf, compression="zstd"); b = buf.getvalue()
    flen = struct.unpack("<I", b[-8:-4])[0]; fs = len(b) - 8 - flen
    b = b[:fs] + b"\0" * (size - len(b)) + b[fs:]
    st = os.stat(f)
    with open(f, "r+b") as fh: fh.write(b)        # altered in place
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))   # touch -r
    print("file on disk now holds", pq.read_table(f).num_rows, "rows")
    try:
        n = c.do_get(fl.Ticket(b"p")).read_all().num_rows
        out = "served %d rows" % n; served = True
    except Exception as e:
        out = str(e).split(". gRPC")[0][:200]; served = False
    print("cached server:", out)
    p.terminate(); p.wait()
    p2, c2, errf2 = start(d)
    try:
        out2 = "served %d rows" % c2.do_get(fl.Ticket(b"p")).read_all().num_rows
    except Exception as e:
        out2 = str(e).split(". gRPC")[0][:200]
    print("server without --cache-dir:", out2)
    p2.terminate(); p2.wait()
    if "panic" in open(errf).read() or "panic" in open(errf2).read():
        print("PANIC"); return 1
    if served:
        print("BUG: the altered file's read did not fail with DATA_LOSS (served from the IPC cache)")
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
