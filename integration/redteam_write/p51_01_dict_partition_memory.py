"""Red team round 51's p01 (docs/reliability.md): a partitioned write of ONE small batch (4,000 rows) whose dictionary<int32,string>
column carries a ~18 MiB dictionary, spread over 256 partitions, drives the server's peak
RSS to several GiB (~20 MiB per partition: every partition seems to hold the whole
dictionary), far past --memory-limit (240 MiB) and --put-memory (128 MiB). Memory grows
with partitions x dictionary bytes: up to 4096 partitions x a ~100 MiB dictionary fits
in one message under the 128 MiB receive limit -> OOM.
Exit 1 if the server's peak RSS exceeds 1.5 GiB (bug), 0 otherwise."""
import sys, os, json, time, tempfile, shutil, socket, subprocess, random, signal
import numpy as np, pyarrow as pa, pyarrow.flight as fl

BIN = sys.argv[1] if len(sys.argv) > 1 else os.environ["QUIVER"]
LIMIT_MIB = 1536
NPARTS, ROWS, DICTN = 256, 4000, 500_000

def port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for _ in range(200):
        p = random.randint(19700, 19799); s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")

def peak(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmHWM"): return int(l.split()[1]) // 1024

tmp = tempfile.mkdtemp(prefix="rt51-p01-")
p = port()
srv = subprocess.Popen([BIN, "serve", "--data-dir", os.path.join(tmp, "data"), "--addr", f"127.0.0.1:{p}",
                        "--log-level", "error"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
stop = False
try:
    if b"serving" not in srv.stdout.readline(): raise SystemExit("server did not start")
    c = fl.connect(f"grpc://127.0.0.1:{p}")
    dvals = pa.array(["val_%09d_" % j + "x" * 20 for j in range(DICTN)])
    ids = np.arange(ROWS)
    rng = np.random.default_rng(0)
    b = pa.RecordBatch.from_arrays([pa.array(ids), pa.array((ids % NPARTS).astype(np.int32)),
        pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, DICTN, ROWS).astype(np.int32)), dvals)],
        names=["id", "p", "d"])
    cmd = {"path": "m/d", "mode": "write", "partition_by": ["p"]}
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), b.schema)
    w.write_batch(b); w.done_writing(); r.read(); w.close()
    got = c.do_get(fl.Ticket(b"m/d")).read_all()
    assert got.num_rows == ROWS
    mib = peak(srv.pid)
    print(f"sent {b.nbytes/2**20:.1f} MiB in one batch; server peak RSS {mib} MiB (limit for this check {LIMIT_MIB})")
    sys.exit(1 if mib > LIMIT_MIB else 0)
finally:
    srv.terminate()
    try: srv.wait(15)
    except subprocess.TimeoutExpired: srv.kill(); srv.wait()
    shutil.rmtree(tmp, ignore_errors=True)
