#!/usr/bin/env python3
"""Red team round 52's p02 (open; docs/reliability.md): a partitioned write whose dictionary holds a few large values grows the
server's memory by ~4 MiB per partition per 1 MiB value used, without bound.
One 60 MB batch: a binary dictionary of 60 random 1 MB values, 400 rows, one per
partition (400 partitions), each row referencing one value. The same bytes as a
plain (non-dictionary) column stay at ~280 MiB; this peaks at ~1.7 GiB
(~4 GiB at 1,000 partitions; the 4,096-partition limit would allow ~16 GiB).
Exit 1 if peak RSS (VmHWM) of the server passes 768 MiB."""
import json, os, shutil, socket, subprocess, sys, tempfile
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

tmp = tempfile.mkdtemp(prefix="rt52-p02-")
pt = port()
srv = subprocess.Popen([BIN, "serve", "--data-dir", tmp + "/data", "--addr", f"127.0.0.1:{pt}"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    assert "serving" in srv.stdout.readline()
    c = fl.FlightClient(f"grpc+tcp://127.0.0.1:{pt}")
    rng = np.random.default_rng(5)
    nparts, nvals = 400, 60
    vals = pa.array([rng.bytes(1_000_000) for _ in range(nvals)], pa.binary())
    col = pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, nvals, nparts), pa.int32()), vals)
    b = pa.record_batch([pa.array(np.arange(nparts)), pa.array(np.arange(nparts), pa.int32()), col], names=["id", "p", "d"])
    cmd = {"path": "t/x", "mode": "write", "partition_by": ["p"]}
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd).encode()), b.schema)
    w.write_batch(b); w.done_writing(); r.read(); w.close()
    hwm = next(int(l.split()[1]) // 1024 for l in open(f"/proc/{srv.pid}/status") if l.startswith("VmHWM"))
    got = c.do_get(fl.Ticket(json.dumps({"path": "t/x", "columns": ["id", "d"]}).encode())).read_all()
    m = dict(zip(got.column("id").to_pylist(), got.column("d").to_pylist()))
    exact = all(m[i] == v for i, v in enumerate(col.to_pylist()))
    print(f"peak RSS {hwm} MiB for a {b.nbytes >> 20} MiB batch over {nparts} partitions; data exact: {exact}")
    c.close()
    bug = hwm > 768 or not exact
finally:
    srv.terminate()
    try: srv.wait(20)
    except subprocess.TimeoutExpired: srv.kill(); srv.wait()
    shutil.rmtree(tmp, ignore_errors=True)
print("BUG" if bug else "ok")
sys.exit(1 if bug else 0)
