"""Shared helpers for the command-line red-team reproducers (c01_*.py … c10_*.py,
round 12): a Server running `quiver serve` on a temp dir, the CLI run against
it, and an IPC stream writer. The binary is env QUIVER, else <repo>/bin/quiver.
"""
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

class Server:
    def __init__(self, *extra):
        self.tmp = tempfile.mkdtemp(prefix="rt12_")
        self.data = os.path.join(self.tmp, "data")
        self.log = open(os.path.join(self.tmp, "server.log"), "w")
        self.p = subprocess.Popen([QUIVER, "serve", "--data-dir", self.data, "--addr", "127.0.0.1:0", *extra],
                                  stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.addr = self.p.stdout.readline().strip().rsplit(" on ", 1)[1]
        self.client = fl.connect("grpc://" + self.addr)
    def cli(self, *args, timeout=120):
        return subprocess.run([QUIVER, *args, "--server", self.addr], capture_output=True, timeout=timeout)
    def put(self, profile, *files, extra=()):
        return self.cli("put", "--progress", "never", *extra, profile, *files)
    def doget(self, profile):
        return self.client.do_get(fl.Ticket(profile.encode())).read_all()
    def snapshot(self):
        out = {}
        for root, ds, fs in os.walk(self.data):
            for n in ds + fs:
                p = os.path.join(root, n)
                out[os.path.relpath(p, self.data)] = os.lstat(p).st_size if not os.path.isdir(p) else -1
        return out
    def cleanup(self):
        try: self.client.close()
        except Exception: pass
        self.p.terminate()
        try: self.p.wait(10)
        except Exception: self.p.kill(); self.p.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

def write_stream(path, batches, schema, **opts):
    with ipc.new_stream(path, schema, options=ipc.IpcWriteOptions(**opts)) as w:
        for b in batches: w.write_batch(b)
