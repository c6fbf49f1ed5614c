#!/usr/bin/env python3
"""Side-by-side large puts of two or more quiver binaries.

    python3 bench/ab_put.py BIN_A,BIN_B [part|one [ROUNDS [EXTRA_SERVE_FLAGS...]]]

Each round runs every binary once, in turn: a server on a fresh data dir
under $AB_WORK (default /tmp/quiver-ab-put), one put of $AB_SOURCE (default
/tmp/quiver-bench-1/source.arrow, the 1 GiB source bench.py generates at
BENCH_SCALE=1) to warm it up, then the timed put, partitioned by `part`
(part, the default) or as one file (one), from pyarrow. It prints each
run's time, the server's CPU seconds during the timed put, its peak RSS
(VmHWM) and the hypervisor's steal, then each binary's medians. Binaries
are run from copies, as bench/run.sh does (a binary fresh from the linker
maps all its pages). Compare medians of one run only: this machine's
figures drift by a fifth within an hour (docs/benchmarks.md, "Running it").
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.flight as fl

from ab_appends import free_port, steal_and_total, wait_listening


def put(client, src, mode, name):
    f = pa.ipc.open_file(pa.memory_map(src))
    cmd = {"path": f"ab/{name}", "mode": "write"}
    if mode == "part":
        cmd["partition_by"] = ["part"]
    t0 = time.monotonic()
    w, meta = client.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), f.schema)
    for j in range(f.num_record_batches):
        w.write_batch(f.get_batch(j))
    w.done_writing()
    meta.read()
    w.close()
    return time.monotonic() - t0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mode = sys.argv[2] if len(sys.argv) > 2 else "part"
    if mode not in ("part", "one"):
        sys.exit(f"mode {mode!r}: want part or one")
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    extra = sys.argv[4:]
    src = os.environ.get("AB_SOURCE", "/tmp/quiver-bench-1/source.arrow")
    if not os.path.exists(src):
        sys.exit(f"{src}: no source; run BENCH_SCALE=1 BENCH_CASES=put bench/run.sh once, or set AB_SOURCE")
    work = os.environ.get("AB_WORK", "/tmp/quiver-ab-put")
    os.makedirs(work, exist_ok=True)
    bins = []
    for i, b in enumerate(sys.argv[1].split(",")):
        c = os.path.join(work, f"bin{i}-{os.path.basename(b)}")
        shutil.copy(os.path.abspath(b), c)
        bins.append(c)
    res = {b: [] for b in bins}
    try:
        for r in range(rounds):
            for i, b in enumerate(bins):
                d = tempfile.mkdtemp(dir=work, prefix=f"r{r}-b{i}-")
                port = free_port()
                srv = subprocess.Popen([b, "serve", "--data-dir", d, "--addr", f"127.0.0.1:{port}",
                                        "--log-level", "error"] + extra,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_listening(port, srv)
                    client = fl.connect(f"grpc://127.0.0.1:{port}")
                    put(client, src, mode, "warm")
                    time.sleep(2)
                    c0, s0 = cpu_seconds(srv.pid), steal_and_total()
                    dt = put(client, src, mode, "timed")
                    c1, s1 = cpu_seconds(srv.pid), steal_and_total()
                    rss = peak_rss_mib(srv.pid)
                    client.close()
                finally:
                    srv.kill()
                    srv.wait()
                    shutil.rmtree(d, ignore_errors=True)
                steal = 100.0 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
                res[b].append((dt, c1 - c0, rss))
                print(f"round {r} {i}:{os.path.basename(b):20s} {mode} {dt:6.2f} s  server CPU {c1 - c0:6.2f} s  "
                      f"peak RSS {rss:4.0f} MiB  steal {steal:4.1f}%", flush=True)
    finally:
        for b in bins:
            os.remove(b)
    for i, b in enumerate(bins):
        v = res[b]
        if v:
            med = [sorted(x[k] for x in v)[len(v) // 2] for k in range(3)]
            print(f"{i}:{os.path.basename(b)} median of {len(v)}: {med[0]:.2f} s, server CPU {med[1]:.2f} s, "
                  f"peak RSS {med[2]:.0f} MiB")


if __name__ == "__main__":
    main()
