#!/usr/bin/env python3
"""Side-by-side appends/s of two or more quiver binaries.

    python3 bench/ab_appends.py BIN_A,BIN_B [WRITERS [ROUNDS [DURATION]]]

Each round runs every binary once, in turn, on a fresh data dir under
$AB_WORK (default /tmp/quiver-ab): a server on 127.0.0.1, then
flightbench's append case (1,000-row appends from WRITERS writers for
DURATION, default 1 writer, 4 rounds, 8s) against it. It prints each run
with the hypervisor's steal during it (/proc/stat) and each binary's
median. Data dirs are kept until the end and removed all at once: on ext4
without a journal, files removed just before a run slow its creates
(docs/benchmarks.md, "Running it"). Compare medians of the same run
only: this machine's figures drift by a third within an hour.
$AB_FB names a built bench/flightbench (default: built into $AB_WORK).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def steal_and_total():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("server did not listen within 10 s")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bins = [os.path.abspath(b) for b in sys.argv[1].split(",")]
    writers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    duration = sys.argv[4] if len(sys.argv) > 4 else "8s"
    work = os.environ.get("AB_WORK", "/tmp/quiver-ab")
    os.makedirs(work, exist_ok=True)
    fb = os.environ.get("AB_FB")
    if not fb:
        fb = os.path.join(work, "flightbench")
        subprocess.run(["go", "build", "-o", fb, "./bench/flightbench"], cwd=os.path.dirname(HERE), check=True)
    res = {b: [] for b in bins}
    dirs = []
    try:
        for r in range(rounds):
            for i, b in enumerate(bins):
                d = os.path.join(work, f"r{r}-b{i}")
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d)
                dirs.append(d)
                port = free_port()
                srv = subprocess.Popen([b, "serve", "--data-dir", d, "--addr", f"127.0.0.1:{port}", "--log-level", "warn"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_listening(port, srv)
                    s0 = steal_and_total()
                    out = subprocess.run([fb, "append", "-addr", f"127.0.0.1:{port}", "-path", "ab/appends",
                                          "-writers", str(writers), "-duration", duration, "-rows", "1000"],
                                         capture_output=True, text=True, check=True).stdout
                    s1 = steal_and_total()
                finally:
                    srv.kill()
                    srv.wait()
                j = json.loads(out.strip().splitlines()[-1])
                steal = 100.0 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
                res[b].append(j["per_s"])
                print(f"round {r} {i}:{os.path.basename(b):16s} {j['per_s']:8.1f}/s p50 {j['p50_ms']:6.2f} ms "
                      f"p99 {j['p99_ms']:6.2f} ms steal {steal:4.1f}%", flush=True)
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    for i, b in enumerate(bins):
        v = sorted(res[b])
        if v:
            print(f"{i}:{os.path.basename(b)} median {v[len(v) // 2]:.1f}/s of {len(v)}: {', '.join(f'{x:.0f}' for x in res[b])}")


if __name__ == "__main__":
    main()
