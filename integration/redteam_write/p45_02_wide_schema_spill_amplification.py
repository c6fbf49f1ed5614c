#!/usr/bin/env python3
"""p45_02: every spill block (one per partition and batch) carries the IPC metadata
of the whole schema (~100 bytes per column), and that overhead counts toward a
partition's 16 MiB early-encode threshold. A partitioned write of a 1,000-column
int8 schema sending one row to each of 64 partitions per batch (120 batches,
~7.8 MB of Arrow in all) makes the spill file (in the data dir by default) hold
hundreds of MB (about 80x the put's Arrow bytes; 64 partitions x 16 MiB = 1 GiB
for longer puts, 512 partitions: 8 GiB). Docs: the spill needs at most the
write's Arrow bytes. Exits 1 while the spill's peak allocation is more than
max(64 MiB, 4x the Arrow bytes sent).
usage: p45_02_wide_schema_spill_amplification.py /path/to/quiver"""
import os, sys, json, time, socket, subprocess, tempfile, shutil, signal, glob, threading
import numpy as np
import pyarrow as pa, pyarrow.flight as fl

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ["QUIVER"]
    base = tempfile.mkdtemp(prefix="p45_02_")
    data = os.path.join(base, "data")
    port = free_port()
    log = open(os.path.join(base, "server.log"), "wb")
    proc = subprocess.Popen([binary, "serve", "--data-dir", data, "--addr", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=log)
    try:
        line = proc.stdout.readline().decode()
        assert "serving" in line, line
        client = fl.connect(f"grpc://127.0.0.1:{port}")
        peak = [0]; stop = [False]
        def mon():
            while not stop[0]:
                for fd in glob.glob(f"/proc/{proc.pid}/fd/*"):
                    try:
                        if "(deleted)" in os.readlink(fd):
                            peak[0] = max(peak[0], os.stat(fd).st_blocks * 512)
                    except OSError:
                        pass
                time.sleep(0.05)
        th = threading.Thread(target=mon, daemon=True); th.start()
        ncol, nparts, nbatches = 1000, 64, 120
        rows = nparts
        cols = [pa.array(np.arange(rows)), pa.array(np.arange(rows) % nparts)] + \
               [pa.array(np.full(rows, i % 100, np.int8)) for i in range(ncol)]
        batch = pa.record_batch(cols, names=["id", "k"] + ["c%d" % i for i in range(ncol)])
        sent = batch.nbytes * nbatches
        desc = fl.FlightDescriptor.for_command(json.dumps({"path": "t/x", "mode": "write", "partition_by": ["k"]}))
        t0 = time.time()
        w, r = client.do_put(desc, batch.schema)
        for _ in range(nbatches):
            w.write_batch(batch)
        w.done_writing()
        res = json.loads(r.read().to_pybytes()); w.close()
        stop[0] = True; th.join()
        print(f"put rows={res['rows']} in {time.time()-t0:.1f}s; Arrow bytes sent {sent/2**20:.1f} MiB; "
              f"spill file peak allocated {peak[0]/2**20:.0f} MiB")
        assert res["rows"] == rows * nbatches
        if peak[0] > max(64 << 20, 4 * sent):
            print("BUG: spill holds %.0fx the put's Arrow bytes" % (peak[0] / sent))
            return 1
        print("ok")
        return 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try: proc.wait(30)
            except subprocess.TimeoutExpired: proc.kill(); proc.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
