#!/usr/bin/env python3
"""j08: a commit-log segment replaced by a directory or a FIFO makes every read,
put and list-versions of the profile fail with INTERNAL ("internal error (see
server log)"; cause `read commit log of …: fsys: not a regular file`) instead of
DATA_LOSS.

Docs: protocol.md "Errors": DataLoss for "committed data or metadata lost or
altered on the storage: … replaced by a link, directory or special file; a commit
log truncated, corrupt …"; reliability.md round 15 (h02/h03): a manifest or lock
replaced by a directory was INTERNAL and is now reported as corruption.

Exit 0 when the bug is absent: the read is refused with DATA_LOSS.
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


def put(c, path, t):
    w, r = c.do_put(fl.FlightDescriptor.for_path(*path.split("/")), t.schema)
    w.write_table(t); w.done_writing()
    try: r.read()
    finally: w.close()

def main():
    bad = []
    for kind in ("directory", "fifo"):
        base = tempfile.mkdtemp(prefix="rt17-j08-", dir="/tmp")
        data = os.path.join(base, "data")
        srv = Server(data)
        try:
            c = srv.start()
            put(c, "seg/p", pa.table({"id": pa.array([1, 2], pa.int64())}))
            put(c, "seg/p", pa.table({"id": pa.array([3], pa.int64())}))
            srv.stop()
            seg = os.path.join(data, "seg", "p", ".log", "00000000000000000002.ndjson")
            os.rename(seg, os.path.join(base, "segment2"))
            if kind == "directory": os.mkdir(seg)
            else: os.mkfifo(seg)
            c = srv.start()
            try:
                c.do_get(fl.Ticket(b"seg/p")).read_all()
                print(f"segment 2 replaced by a {kind}: the read SUCCEEDED"); bad.append((kind, "read succeeded"))
            except fl.FlightError as e:
                code = type(e).__name__
                msg = str(e).split(". gRPC client debug")[0][:120]
                dataloss = "data loss" in str(e).lower() or "DATA_LOSS" in str(e)
                print(f"segment 2 replaced by a {kind}: read refused ({code}): {msg}")
                if not dataloss: bad.append((kind, msg))
        finally:
            srv.stop(); shutil.rmtree(base, ignore_errors=True)
    if bad:
        print("BUG: a log segment that is not a regular file is not reported as DATA_LOSS:", bad)
        return 1
    print("OK: bug absent"); return 0

if __name__ == "__main__":
    sys.exit(main())
