#!/usr/bin/env python3
"""r07 (red team round 9's r04, HIGH): server memory of a partitioned put
was not bounded by --put-memory.

One put of N batches of ~17 MB (25,000 rows: an id, the partition column k
with 4,000 values, 60 string columns, half unique and half 3-valued) into
4,000 partitions. Every batch touches every partition with ~6 rows. The
server kept every finished file's Parquet writer (schema and metadata, tens
of KiB a column) and finished a file per partition and batch: 788 MB of RSS
for 1 x 69 MB batch, 9.2 GB (and 580 s, 63,888 files) for 16 x 17 MB, with a
128 MiB --put-memory budget. Now finished writers are dropped, and the rows
of partitions too small for a writer are held until their file is written
whole: one file per partition while the put fits the budget.

This script sends N=6 batches (N from argv[1]) and fails when the server's
peak RSS exceeds LIMIT_MB (env, default 600) or the put wrote more than two
files per partition.
Exit 0 when correct, 1 while the bug is present."""
import json, os, subprocess, sys, tempfile, threading, time
import numpy as np
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiver"))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 6
LIMIT_MB = int(os.environ.get("LIMIT_MB", "600"))
d = tempfile.mkdtemp(prefix="r04_")
p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                     stderr=open(d + ".stderr", "wb"), env=dict(os.environ, QUIVER_POISON_FREED="1"))
peak = [0]
def monitor():
    while p.poll() is None:
        try:
            peak[0] = max(peak[0], int(open(f"/proc/{p.pid}/status").read().split("VmRSS:")[1].split()[0]) // 1024)
        except Exception:
            pass
        time.sleep(0.05)
try:
    addr = p.stdout.readline().decode().split(" on ")[-1].strip()
    threading.Thread(target=monitor, daemon=True).start()
    c = fl.connect("grpc://" + addr)
    rng = np.random.default_rng(0)
    m = 25000
    cols = {"id": pa.array(np.arange(m, dtype=np.int64)),
            "k": pa.array(np.char.add("p", rng.integers(0, 4000, m).astype(str)))}
    for i in range(60):
        cols[f"c{i}"] = (pa.array(np.char.add(f"{i}-", rng.integers(0, 2**40, m).astype(str))) if i % 2
                         else pa.array(np.array(["x", "y", ""])[rng.integers(0, 3, m)]))
    b = pa.record_batch(cols)
    t0 = time.time()
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(
        {"path": "w/p", "mode": "write", "partition_by": ["k"]})), b.schema)
    for _ in range(N):
        w.write_batch(b)
    w.done_writing()
    res = json.loads(r.read().to_pybytes()); w.close()
    print(f"put of {N} x {b.nbytes / 2**20:.0f} MB into 4000 partitions: {time.time() - t0:.0f} s, "
          f"{len(res['files'])} files, server peak RSS {peak[0]} MB (limit {LIMIT_MB} MB)")
    bad = peak[0] > LIMIT_MB or len(res["files"]) > 2 * 4000
    print("BUG present" if bad else "OK")
    sys.exit(1 if bad else 0)
finally:
    p.terminate(); p.wait()
