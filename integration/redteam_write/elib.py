"""Shared helpers for the command-line red-team reproducers of round 13
(e01_*.py … e10_*.py): a Server running `quiver serve` on a temp dir and the
CLI run against it. The binary is env QUIVER, else <repo>/bin/quiver."""
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))


class Server:
    def __init__(self, *extra):
        self.tmp = tempfile.mkdtemp(prefix="rt13_")
        self.data = os.path.join(self.tmp, "data")
        self.log = open(os.path.join(self.tmp, "server.log"), "w")
        self.p = subprocess.Popen([QUIVER, "serve", "--data-dir", self.data, "--addr", "127.0.0.1:0", *extra],
                                  stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.p.stdout.readline().strip()
        self.addr = line.rsplit(" on ", 1)[1]
        self.client = fl.connect("grpc://" + self.addr)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, content):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
        return p

    def cli(self, *args, timeout=120, stdin=None):
        return subprocess.run([QUIVER, *args, "--server", self.addr], capture_output=True, timeout=timeout, stdin=stdin)

    def put(self, profile, *files, extra=(), timeout=120):
        return self.cli("put", "--progress", "never", *extra, profile, *files, timeout=timeout)

    def get(self, profile, *extra, timeout=120):
        return self.cli("get", "--progress", "never", profile, *extra, timeout=timeout)

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
        try:
            self.client.close()
        except Exception:
            pass
        self.p.terminate()
        try:
            self.p.wait(10)
        except Exception:
            self.p.kill()
            self.p.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.cleanup()


def out(r):
    return (r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")).strip()


def verdict(ok, expected, actual):
    print("expected:", expected)
    print("actual:  ", actual)
    print("FIXED" if ok else "BUG PRESENT")
    sys.exit(0 if ok else 1)
