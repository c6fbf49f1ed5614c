#!/usr/bin/env python3
"""Red team round 52's p01 (docs/reliability.md): a dictionary whose values contain a null makes a partitioned write cost
CPU ~ batches x partitions x dictionary size (25x more than the same put
without the null). Same shape, two puts: 32 batches of 500 rows sharing one
200,000-value string dictionary (~20 values used per batch) over 256 partitions;
the only difference is that one dictionary value (never used) is null.
Exit 1 if the null version costs > 5x the server CPU of the plain one and > 10 s."""
import json, os, shutil, socket, subprocess, sys, tempfile, time
import numpy as np, pyarrow as pa, pyarrow.flight as fl

BIN = sys.argv[1] if len(sys.argv) > 1 else os.environ["QUIVER"]


def port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19800, 19900):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def run(binary, with_null):
    tmp = tempfile.mkdtemp(prefix="rt52-p01-")
    pt = port()
    srv = subprocess.Popen([binary, "serve", "--data-dir", tmp + "/data", "--addr", f"127.0.0.1:{pt}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert "serving" in srv.stdout.readline()
        c = fl.FlightClient(f"grpc+tcp://127.0.0.1:{pt}")
        rng = np.random.default_rng(1)
        n = 200_000
        mask = np.zeros(n, bool)
        if with_null: mask[n - 1] = True          # one null value, never referenced
        d = pa.array([f"v{i:07d}" for i in range(n)], mask=mask)
        batches, base = [], 0
        for b in range(32):
            idx = rng.choice(rng.integers(0, n - 1, 20), 500)
            col = pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), d)
            batches.append(pa.record_batch([pa.array(np.arange(base, base + 500)), pa.array(rng.integers(0, 256, 500), pa.int32()), col],
                                           names=["id", "p", "d"]))
            base += 500
        cmd = {"path": "t/x", "mode": "write", "partition_by": ["p"]}
        c0 = cpu(srv.pid); t0 = time.time()
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd).encode()), batches[0].schema)
        for b in batches: w.write_batch(b)
        w.done_writing(); r.read(); w.close()
        used = cpu(srv.pid) - c0
        got = c.do_get(fl.Ticket(b"t/x")).read_all()
        assert got.num_rows == base
        print(f"{'null in dict' if with_null else 'no null     '}: server CPU {used:.1f} s, wall {time.time()-t0:.1f} s")
        c.close()
        return used
    finally:
        srv.terminate()
        try: srv.wait(20)
        except subprocess.TimeoutExpired: srv.kill(); srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)

plain = run(BIN, False)
nulls = run(BIN, True)
bug = nulls > 10 and nulls > 5 * max(plain, 0.5)
print("BUG" if bug else "ok")
sys.exit(1 if bug else 0)
