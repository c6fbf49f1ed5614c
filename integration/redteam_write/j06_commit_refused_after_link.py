#!/usr/bin/env python3
"""j06: a put whose log segment was linked (committed) is told UNAVAILABLE
"...nothing was committed: retry" when the hidden temp of that segment is removed
by someone else right after the link (what `quiver sweep --older-than 0s`, or
another server's `sweep {"older_than_s": 0}`, does to hidden temps): the server's
own unlink of the temp fails with ENOENT, it takes the commit for failed and
deletes the put's data file and claim. The record stays in the log, so every read
of the profile fails with DATA_LOSS ("committed file vN/i.parquet is missing"),
`verify` reports it missing, and a retry with the same request_id is answered
with the committed record: acknowledged, with its data gone.

Docs: operations.md "Locks, crashes and recovery": appends of other servers
"protected by the threshold alone: one that loses a file to the sweep fails with
UNAVAILABLE, commits nothing, and may be retried"; architecture.md: a commit
happens when its segment is created; every acknowledged put is durable.

The temp remover here stands in for a racing sweep: it removes a segment's hidden
temp as soon as the segment of that number exists (the window a sweep can hit).
Exit 0 when the bug is absent: no read fails, verify finds nothing missing, and
no refused put's request_id is in the log.
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

import threading, collections, re

def put(c, path, t, rid):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, "request_id": rid})), t.schema)
    w.write_table(t); w.done_writing()
    try:
        buf = r.read()
    finally:
        w.close()
    if buf is None: raise RuntimeError("no PutResult")
    return json.loads(buf.to_pybytes())

def main():
    base = tempfile.mkdtemp(prefix="rt17-j06-", dir="/tmp")
    data = os.path.join(base, "data")
    srv = Server(data)
    stop = threading.Event()
    refused = {}; acked = {}
    try:
        c = srv.start()
        put(c, "sw/p", pa.table({"id": pa.array([0], pa.int64())}), "init")
        logd = os.path.join(data, "sw", "p", ".log")
        def writer(w):
            cl = fl.connect(f"grpc://127.0.0.1:{srv.port}"); n = 0
            while not stop.is_set():
                rid = f"w{w}-{n}"; t = pa.table({"id": pa.array([w * 10**6 + n * 10 + i for i in range(3)], pa.int64())})
                try:
                    put(cl, "sw/p", t, rid); acked[rid] = t
                except fl.FlightUnavailableError as e:
                    refused[rid] = (t, str(e)[:160])
                except Exception:
                    pass
                n += 1
        ths = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(12)]
        for t in ths: t.start()
        pat = re.compile(r"^\.[0-9a-f]+\.(\d{20})\.ndjson\.tmp$")
        removed = 0; t0 = time.time(); found = None
        while time.time() - t0 < 15 and not found:
            try: names = os.listdir(logd)
            except OSError: continue
            segs = set(n for n in names if not n.startswith("."))
            for n in names:
                m = pat.match(n)
                if m and (m.group(1) + ".ndjson") in segs:
                    try: os.remove(os.path.join(logd, n)); removed += 1
                    except OSError: pass
            if removed and int(time.time() * 10) % 5 == 0:
                # did a refused put's request id get committed?
                rids = set()
                for s in os.listdir(logd):
                    if s.endswith(".ndjson") and not s.startswith("."):
                        try:
                            for l in open(os.path.join(logd, s)):
                                rids.add(json.loads(l).get("request_id"))
                        except (OSError, ValueError): pass
                both = [r for r in list(refused) if r in rids]
                if both: found = both
        stop.set()
        for t in ths: t.join(20)
        print(f"temps removed after their segment was linked: {removed}; puts acknowledged {len(acked)}, refused UNAVAILABLE {len(refused)}")
        problems = []
        if found:
            rid = found[0]
            print(f"refused put {rid} ({refused[rid][1]!r}) is nevertheless committed in the log")
            problems.append("refused put committed")
            try:
                res = put(c, "sw/p", refused[rid][0], rid)
                print(f"retry of {rid} with the same request_id acknowledged as record {res.get('seq')} naming {[f['path'] for f in res['files']]}")
                missing = [f["path"] for f in res["files"] if not os.path.exists(os.path.join(data, "sw", "p", f["path"]))]
                if missing:
                    print("   ...but its data file is gone:", missing); problems.append("acknowledged put without its data")
            except Exception as e:
                print("retry failed:", str(e)[:150])
        try:
            n = c.do_get(fl.Ticket(b"sw/p")).read_all().num_rows
            print("read of the profile:", n, "rows")
        except Exception as e:
            print("read of the profile failed:", str(e)[:160]); problems.append("profile unreadable")
        v = json.loads(list(c.do_action(fl.Action("verify", b"{}")))[0].body.to_pybytes())
        miss = [p for p in v["problems"] if p["kind"] == "missing"]
        if miss:
            print("verify:", miss[0]["kind"], miss[0]["path"], miss[0]["detail"][:100]); problems.append("verify: missing")
        if problems:
            print("BUG: a put committed its record but was refused and its data file deleted:", ", ".join(problems))
            return 1
        print("OK: bug absent (not hit within 15 s)"); return 0
    finally:
        stop.set(); srv.stop(); shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
