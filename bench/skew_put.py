#!/usr/bin/env python3
"""Skewed partitioned puts of one or more quiver binaries: the spill's size.

    python3 bench/skew_put.py BIN[,BIN...] [BATCH_ROWS [ROUNDS]]

Makes (once) a skewed copy of the suite's 1 GiB source (AB_SOURCE, default
/tmp/quiver-bench-1/source.arrow, from BENCH_SCALE=1 bench/run.sh): 90% of
its rows in partition 0 of `part`, the rest spread over 63 others, in
batches of BATCH_ROWS rows (default 10,000: every batch gives each small
partition a few rows). Then, for each round and binary in turn: a server
on a fresh data dir, a warm-up put, and a timed partitioned put, sampling
the spill file's allocated size (the server's nameless open file,
st_blocks) every 50 ms. It prints the put's time, the server's CPU
seconds, the spill's largest size, the server's peak RSS and the row
groups written. docs/benchmarks.md, twenty-second session.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.flight as fl

from ab_appends import free_port, wait_listening
from ab_put import cpu_seconds, peak_rss_mib, put


def skewed_source(src, rows):
    out = f"/tmp/quiver-skew-{rows}.arrow"
    if os.path.exists(out):
        return out
    f = pa.ipc.open_file(pa.memory_map(src))
    idx = f.schema.get_field_index("part")
    rng = np.random.default_rng(1)
    tmp = out + ".tmp"
    with pa.OSFile(tmp, "wb") as sink:
        w = pa.ipc.new_file(sink, f.schema)
        for i in range(f.num_record_batches):
            b = f.get_batch(i)
            n = b.num_rows
            vals = np.where(rng.random(n) < 0.9, 0, rng.integers(1, 64, n))
            cols = list(b.columns)
            cols[idx] = pa.array(vals.astype(b.column(idx).type.to_pandas_dtype()), type=b.column(idx).type)
            for s in pa.Table.from_batches([pa.RecordBatch.from_arrays(cols, schema=f.schema)]).to_batches(max_chunksize=rows):
                w.write_batch(s)
        w.close()
    os.rename(tmp, out)
    return out


def spill_bytes(pid):
    """The allocated size of the server's nameless open files."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if "#" in target or "(deleted)" in target:
                n = max(n, os.stat(f"/proc/{pid}/fd/{fd}").st_blocks * 512)
        except OSError:
            pass
    return n


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    src = skewed_source(os.environ.get("AB_SOURCE", "/tmp/quiver-bench-1/source.arrow"), rows)
    for r in range(rounds):
        for i, b in enumerate(sys.argv[1].split(",")):
            d = tempfile.mkdtemp(prefix="quiver-skew-")
            try:
                exe = os.path.join(d, "quiver")
                shutil.copy(os.path.abspath(b), exe)  # (as bench/run.sh runs it)
                port = free_port()
                p = subprocess.Popen([exe, "serve", "--data-dir", os.path.join(d, "data"), "--addr", f"127.0.0.1:{port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_listening(port, p)
                    c = fl.connect(f"grpc://127.0.0.1:{port}")
                    put(c, src, "part", "warm")
                    peak = [0]
                    done = threading.Event()

                    def sample():
                        while not done.is_set():
                            peak[0] = max(peak[0], spill_bytes(p.pid))
                            time.sleep(0.05)

                    t = threading.Thread(target=sample)
                    t.start()
                    c0 = cpu_seconds(p.pid)
                    dt = put(c, src, "part", "timed")
                    cpu = cpu_seconds(p.pid) - c0
                    done.set()
                    t.join()
                    rss = peak_rss_mib(p.pid)
                finally:
                    p.kill()
                    p.wait()
                files = glob.glob(os.path.join(d, "data", "ab", "timed", "v*", "**", "*.parquet"), recursive=True)
                groups = [pq.ParquetFile(f).metadata.num_row_groups for f in files]
                print(f"round {r} {i}:{os.path.basename(b):12} {dt:6.2f} s  server CPU {cpu:6.2f} s  spill at most {peak[0] / 2**20:6.0f} MiB  "
                      f"peak RSS {rss:4.0f} MiB  {len(files)} files, {sum(groups)} row groups", flush=True)
            finally:
                shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
