#!/usr/bin/env python3
"""p45_01: a partitioned write's spill copies a batch's whole dictionary into every
partition's block. One 2 MiB DoPut message (10,000 rows, a dictionary<int32,string>
column with 20,000 distinct ~100-byte values) spread over 500 partitions makes the
server write ~1 GB to its spill file (in the data directory by default): disk use
and I/O grow with (dictionary bytes x partitions), not with the put's size.
Docs (operations.md --spill-dir / Limits): the spill needs at most the write's Arrow
bytes of free space. Exit 1 while the spill writes > 64 MiB for this 2 MiB put.
usage: p45_01_dictionary_spill_amplification.py /path/to/quiver"""
import os, sys, json, time, socket, subprocess, tempfile, shutil, signal, glob, threading
import numpy as np
import pyarrow as pa, pyarrow.flight as fl

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ["QUIVER"]
    base = tempfile.mkdtemp(prefix="p45_01_")
    data = os.path.join(base, "data")
    port = free_port()
    log = open(os.path.join(base, "server.log"), "wb")
    proc = subprocess.Popen([binary, "serve", "--data-dir", data, "--addr", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=log)
    try:
        line = proc.stdout.readline().decode()
        assert "serving" in line, line
        client = fl.connect(f"grpc://127.0.0.1:{port}")
        def wchar():
            for l in open(f"/proc/{proc.pid}/io"):
                if l.startswith("wchar:"): return int(l.split()[1])
        peak = [0]; stop = [False]
        def mon():
            while not stop[0]:
                for fd in glob.glob(f"/proc/{proc.pid}/fd/*"):
                    try:
                        if "(deleted)" in os.readlink(fd):
                            peak[0] = max(peak[0], os.stat(fd).st_blocks * 512)
                    except OSError:
                        pass
                time.sleep(0.02)
        th = threading.Thread(target=mon, daemon=True); th.start()
        nparts, rows, dictn = 500, 10000, 20000
        dictv = pa.array(["%06d-" % j + "d" * 94 for j in range(dictn)])
        idx = pa.array(np.random.default_rng(1).integers(0, dictn, rows).astype(np.int32))
        batch = pa.record_batch([pa.array(np.arange(rows)), pa.array(np.arange(rows) % nparts),
                                 pa.DictionaryArray.from_arrays(idx, dictv)], names=["id", "k", "d"])
        sent = batch.nbytes
        w0 = wchar()
        desc = fl.FlightDescriptor.for_command(json.dumps({"path": "t/x", "mode": "write", "partition_by": ["k"]}))
        w, r = client.do_put(desc, batch.schema)
        w.write_batch(batch); w.done_writing()
        res = json.loads(r.read().to_pybytes()); w.close()
        written = wchar() - w0
        stop[0] = True; th.join()
        t = client.do_get(fl.Ticket(b"t/x")).read_all()
        print(f"put rows={res['rows']} read back={t.num_rows}; Arrow bytes sent {sent/2**20:.1f} MiB; "
              f"server wrote {written/2**20:.0f} MiB; spill file peak allocated {peak[0]/2**20:.0f} MiB")
        assert t.num_rows == rows
        limit = 64 << 20
        if written > limit or peak[0] > limit:
            print("BUG: spill disk/IO amplification: %.0fx the put's Arrow bytes" % (max(written, peak[0]) / sent))
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
