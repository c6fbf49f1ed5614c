#!/usr/bin/env python3
"""j04: when two servers commit to one profile at once after a lock takeover
(forced here with --lock-stale-after 1ms), a server that loses the race for the
next log segment twice in a row fails its puts with INTERNAL ("internal error
(see server log)"; log cause: `commit …: fsys: commit ".log/000…N.ndjson": file
exists`) instead of re-reading the log and retrying the cycle.

Docs: architecture.md "Who commits": "If the exclusive create of the segment
fails (another committer holds a lock it believes is its own after a lock was
broken), the committer reads the log again and retries the cycle"; a commit whose
outcome is unknown is UNAVAILABLE (retry with the same request_id).

Exit 0 when the bug is absent: no put is answered INTERNAL within the run.
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

def put(c, path, t, rid):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, "request_id": rid})), t.schema)
    w.write_table(t); w.done_writing()
    try:
        buf = r.read()
    finally:
        w.close()  # raises the put's status, if it failed
    if buf is None: raise RuntimeError("no PutResult")
    return json.loads(buf.to_pybytes())

def main():
    base = tempfile.mkdtemp(prefix="rt17-j04-", dir="/tmp")
    data = os.path.join(base, "data")
    srvs = [Server(data + "", args=["--lock-stale-after", "1ms"]) for _ in range(3)]
    for i, s in enumerate(srvs): s.log = os.path.join(base, f"server{i}.log")
    stop = threading.Event(); internal = []; acked = collections.Counter(); other = collections.Counter()
    try:
        clients = [s.start() for s in srvs]
        put(clients[0], "race/p", pa.table({"id": pa.array([0], pa.int64())}), "init")
        def writer(w):
            c = fl.connect(f"grpc://127.0.0.1:{srvs[w % 3].port}"); n = 0
            while not stop.is_set():
                t = pa.table({"id": pa.array(range(random.randint(1, 10)), pa.int64())})
                try:
                    put(c, "race/p", t, f"w{w}-{n}"); acked[w] += 1
                except fl.FlightInternalError as e:
                    internal.append(str(e)[:120]); stop.set()
                except Exception as e:
                    other[str(e)[:80]] += 1
                n += 1
        ths = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(24)]
        for t in ths: t.start()
        t0 = time.time()
        while time.time() - t0 < 15 and not stop.is_set(): time.sleep(0.2)
        stop.set()
        for t in ths: t.join(20)
        print(f"{sum(acked.values())} puts acknowledged in {time.time() - t0:.1f}s; other errors: {dict(other)}")
        if internal:
            causes = set()
            for s in srvs:
                for l in open(s.log, errors="replace"):
                    if '"status":"Internal"' in l:
                        try: causes.add(json.loads(l).get("cause", "")[:120])
                        except ValueError: pass
            print("BUG: a put was answered INTERNAL:", internal[0])
            for cz in sorted(causes)[:3]: print("   server log cause:", cz)
            return 1
        print("OK: bug absent (no INTERNAL in 15 s)"); return 0
    finally:
        stop.set()
        for s in srvs: s.stop()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
