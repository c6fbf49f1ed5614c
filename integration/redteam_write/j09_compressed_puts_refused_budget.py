#!/usr/bin/env python3
"""j09: with a handful of concurrent puts (8 clients) whose batches are
IPC-compressed (pyarrow IpcWriteOptions(compression="zstd")), small valid batches
(1,000 rows, ~12 KB decompressed) are refused RESOURCE_EXHAUSTED "a batch
decompresses to more than the server's in-flight budget has room for (536870912
bytes, --max-inflight-bytes); send smaller batches", with the default limits. The
same load uncompressed never fails. The batch is ~40,000 times smaller than the
budget it is said to exceed: the budget is held by the other streams' pending
receives (128 MiB each), and a decompression charge does not wait for them.

Docs: operations.md "Limits": each limit "refuses with a status that names what was
exceeded"; "A receive that finds no room waits (so a burst of puts queues rather
than fails)"; "a batch that decompresses past the budget" is the refusal's case.

Exit 0 when the bug is absent: no put is refused in 8 s of load.
"""
import os, sys, json, shutil, socket, subprocess, tempfile, time, struct, random
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    ports = list(range(19700, 19800)); random.shuffle(ports)
    for p in ports:
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise RuntimeError("no free port in 19700-19799")

class Server:
    def __init__(self, data, args=()):
        self.data = data; self.port = free_port(); self.p = None; self.args = list(args)
        self.log = data.rstrip("/") + ".server.log"
    def start(self):
        self.lf = open(self.log, "ab")
        self.p = subprocess.Popen([QUIVER, "serve", "--data-dir", self.data, "--addr", f"127.0.0.1:{self.port}", *self.args],
                                  stdout=self.lf, stderr=self.lf)
        for _ in range(400):
            try: socket.create_connection(("127.0.0.1", self.port), 0.2).close(); return fl.connect(f"grpc://127.0.0.1:{self.port}")
            except OSError: time.sleep(0.05)
        raise RuntimeError("server did not start")
    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            try: self.p.wait(10)
            except subprocess.TimeoutExpired: self.p.kill(); self.p.wait()

import threading, collections

def main():
    base = tempfile.mkdtemp(prefix="rt17-j09-", dir="/tmp")
    srv = Server(os.path.join(base, "data"))
    stop = threading.Event(); res = collections.Counter(); msgs = []
    try:
        srv.start()
        t = pa.table({"id": pa.array(range(1000), pa.int64()), "s": pa.array(["abc%d" % (i % 10) for i in range(1000)])})
        def writer(k):
            cl = fl.connect(f"grpc://127.0.0.1:{srv.port}")
            opts = fl.FlightCallOptions(write_options=pa.ipc.IpcWriteOptions(compression="zstd"))
            while not stop.is_set():
                try:
                    w, r = cl.do_put(fl.FlightDescriptor.for_path("comp", f"p{k % 3}"), t.schema, options=opts)
                    w.write_table(t); w.done_writing()
                    try: r.read()
                    finally: w.close()
                    res["ok"] += 1
                except Exception as e:
                    res["refused"] += 1
                    if len(msgs) < 3: msgs.append(str(e).split(". gRPC client debug")[0][:260])
        ths = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(8)]
        for th in ths: th.start()
        time.sleep(8); stop.set()
        for th in ths: th.join(30)
        print(f"8 clients, zstd-compressed 1,000-row batches, 8 s: {res['ok']} puts committed, {res['refused']} refused")
        for m in msgs: print("   ", m)
        if res["refused"]:
            print("BUG: small valid compressed batches are refused as exceeding the 512 MiB in-flight budget")
            return 1
        print("OK: bug absent"); return 0
    finally:
        stop.set(); srv.stop(); shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
