"""One put, side by side with another: where a put's time and CPU go.

usage: phase.py QUIVER_BIN SOURCE.arrow part|one [serve flags...]

Starts QUIVER_BIN on a fresh data dir (port 19435), puts SOURCE (the Arrow
file bench.py generates: /tmp/quiver-bench-1/source.arrow at scale 1) once
to warm up, then once more while the server's CPU is sampled every 0.25 s,
partitioned by `part` (part) or as one file (one). Prints when the client
had sent everything, when the put was answered, the server's CPU seconds,
and the samples (cores busy). Run it for two binaries or modes in turn
(docs/benchmarks.md, sixteenth session).
"""
import sys, os, json, subprocess, time, tempfile, threading, shutil
import pyarrow as pa, pyarrow.flight as fl
binp, src, mode = sys.argv[1], sys.argv[2], sys.argv[3]
d = tempfile.mkdtemp(dir="/tmp")
port = 19435
srv = subprocess.Popen([binp, "serve", "--data-dir", d, "--addr", f"127.0.0.1:{port}", "--log-level", "warn"] + sys.argv[4:], stdout=subprocess.DEVNULL)
c = fl.connect(f"grpc://127.0.0.1:{port}")
for _ in range(100):
    try: c.list_actions(); break
    except Exception: time.sleep(0.1)
def cpu():
    with open(f"/proc/{srv.pid}/stat") as f: st = f.read().rsplit(")",1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
marks = {}
def put(i):
    f = pa.ipc.open_file(pa.memory_map(src))
    rdr = pa.RecordBatchReader.from_batches(f.schema, (f.get_batch(j) for j in range(f.num_record_batches)))
    cmd = {"path": f"b/p{i}", "mode": "write"}
    if mode == "part": cmd["partition_by"] = ["part"]
    t0 = time.time()
    w, meta = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), rdr.schema)
    for b in rdr: w.write_batch(b)
    w.done_writing(); marks["sent"] = time.time() - t0
    meta.read(); w.close(); marks["done"] = time.time() - t0
    shutil.rmtree(os.path.join(d, "b", f"p{i}"), ignore_errors=True)
put(0); os.sync()
samples = []
stop = False
def sampler():
    t0 = time.time(); last = cpu()
    while not stop:
        time.sleep(0.25); now = cpu(); samples.append((round(time.time()-t0,2), round((now-last)/0.25,2))); last = now
th = threading.Thread(target=sampler); th.start()
c0 = cpu(); put(1); stop = True; th.join()
print(mode, "sent at", round(marks["sent"],2), "done at", round(marks["done"],2), "server cpu", round(cpu()-c0,2))
print(" ".join(f"{u:.1f}" for _, u in samples))
srv.kill(); shutil.rmtree(d, ignore_errors=True)
