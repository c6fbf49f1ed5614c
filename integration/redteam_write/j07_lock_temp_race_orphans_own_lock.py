#!/usr/bin/env python3
"""j07: when the hidden temp of the manifest lock is removed by someone else right
after the server linked it to `manifest.json.write_lock` (what a racing
`quiver sweep --older-than 0s` does to hidden temps), the server takes its lock
acquisition for failed but leaves the linked lock behind, naming itself. From then
on every put to the profile waits 10 s and fails "manifest lock timeout ... held by
live process <the server itself>", and `break-lock` refuses, for the whole stale
limit (10 minutes).

Docs: format.md "The manifest lock" (held for one commit cycle); reliability.md
"Faults on the relaxed path": a lock of the live server that its own next put waited
out as another writer's was a bug, fixed for failed releases ("the process takes back,
by compare-and-swap, a lock it failed to release"); operations.md: a put that loses a
file to a sweep fails with UNAVAILABLE and may be retried.

Exit 0 when the bug is absent: after the race, a put succeeds within 12 s.
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

import threading, re

def put(c, path, t, timeout=60):
    w, r = c.do_put(fl.FlightDescriptor.for_path(*path.split("/")), t.schema, options=fl.FlightCallOptions(timeout=timeout))
    w.write_table(t); w.done_writing()
    try:
        buf = r.read()
    finally:
        w.close()
    if buf is None: raise RuntimeError("no PutResult")
    return json.loads(buf.to_pybytes())

def main():
    base = tempfile.mkdtemp(prefix="rt17-j07-", dir="/tmp")
    data = os.path.join(base, "data")
    srv = Server(data)
    stop = threading.Event()
    try:
        c = srv.start()
        one = pa.table({"id": pa.array([1], pa.int64())})
        put(c, "lk/p", one)
        prof = os.path.join(data, "lk", "p")
        def writer():
            cl = fl.connect(f"grpc://127.0.0.1:{srv.port}")
            while not stop.is_set():
                try: put(cl, "lk/p", one, timeout=30)
                except Exception: pass
        ths = [threading.Thread(target=writer, daemon=True) for _ in range(4)]
        for t in ths: t.start()
        pat = re.compile(r"^\.[0-9a-f]+\.manifest\.json\.write_lock\.tmp$")
        removed = 0; t0 = time.time()
        while not removed and time.time() - t0 < 20:
            for n in os.listdir(prof):
                if pat.match(n) and os.path.exists(os.path.join(prof, "manifest.json.write_lock")):
                    try: os.remove(os.path.join(prof, n)); removed += 1
                    except OSError: pass
        stop.set()
        for t in ths: t.join(40)
        if not removed:
            print("no lock temp was seen after its link in 20 s (the lock is no longer taken through a temp): bug absent"); return 0
        print("removed a lock temp right after it was linked")
        time.sleep(0.5)
        t0 = time.time()
        try:
            put(c, "lk/p", one, timeout=20)
            print(f"a put after the race succeeded in {time.time() - t0:.1f}s")
            print("OK: bug absent"); return 0
        except Exception as e:
            print(f"a put after the race failed after {time.time() - t0:.1f}s: {str(e)[:220]}")
        lock = open(os.path.join(prof, "manifest.json.write_lock")).read() if os.path.exists(os.path.join(prof, "manifest.json.write_lock")) else None
        print("lock file:", lock, "(server pid", srv.p.pid, ")")
        br = json.loads(list(c.do_action(fl.Action("break-lock", json.dumps({"path": "lk/p"}).encode())))[0].body.to_pybytes())
        print("break-lock:", br)
        print("BUG: the server's own orphaned lock blocks every put to the profile until the 10-minute stale limit")
        return 1
    finally:
        stop.set(); srv.stop(); shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
