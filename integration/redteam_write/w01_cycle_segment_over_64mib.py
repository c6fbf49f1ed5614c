#!/usr/bin/env python3
"""w01: plain appends planned before an evolving append commit, finished together,
record their (large, legal) older schema each; one commit cycle's segment then exceeds
64 MiB and after a restart the profile is unreadable (reads/puts DATA_LOSS, verify fails).
Exit 1 while the bug is present, 0 when fixed."""
import os, sys, json, time, socket, subprocess, tempfile, shutil, threading
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")

class Server:
    def __init__(self, data, extra=()):
        self.data, self.port, self.extra, self.p = data, free_port(), list(extra), None
    def start(self):
        self.p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{self.port}", "--data-dir", self.data,
                                   "--log-level", "error"] + self.extra, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.p.stdout.readline(); assert b"serving" in line, line
        self.c = self.client(); return self
    def client(self):
        return fl.FlightClient(f"grpc://127.0.0.1:{self.port}", generic_options=[("grpc.max_receive_message_length", 1 << 30)])
    def stop(self):
        if self.p:
            self.p.terminate()
            try: self.p.wait(30)
            except subprocess.TimeoutExpired: self.p.kill(); self.p.wait()
            self.p = None

def put(c, desc, table):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(desc).encode()), table.schema)
    w.write_table(table); w.done_writing(); b = r.read(); w.close()
    return json.loads(b.to_pybytes())

def read(c, path):
    return c.do_get(fl.Ticket(json.dumps({"path": path}).encode())).read_all()

N = 12
tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d")
s = Server(data, extra=["--max-recv-msg-size", str(16 << 20)]).start()
bug = False
try:
    # a legal schema: 64 columns with long names, ~7.7 MB as stored (base64), under the 8 MiB limit
    n = 64; L = int(5.5 * 1024 * 1024 / n)
    S0 = pa.schema([pa.field(("c" * L)[:-4] + "%04d" % j, pa.int64()) for j in range(n)])
    t0 = pa.table([pa.array([1])] * n, schema=S0)
    put(s.c, {"path": "p/q", "mode": "write", "schema_version": "1.0.0"}, t0)
    # N plain appends planned on S0, left open
    ws = []
    for i in range(N):
        c = s.client()
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "p/q"}).encode()), S0)
        w.write_table(t0); ws.append((c, w, r))
    time.sleep(1)
    # an append adding one nullable column commits: the version's schema is now S0 + "new"
    S1 = S0.append(pa.field("new", pa.int64()))
    ra = put(s.c, {"path": "p/q", "schema_version": "1.1.0"}, pa.table([pa.array([1])] * (n + 1), schema=S1))
    print("evolving append committed: seq", ra["seq"])
    acked = 1 + 1
    bar = threading.Barrier(N); res = [None] * N
    def fin(i):
        c, w, r = ws[i]; bar.wait()
        try:
            w.done_writing(); b = r.read(); w.close(); j = json.loads(b.to_pybytes())
            res[i] = ("ok", j["seq"], len(j.get("schema", "")))
        except Exception as e:
            res[i] = ("err", str(e)[:160])
    th = [threading.Thread(target=fin, args=(i,)) for i in range(N)]
    [x.start() for x in th]; [x.join() for x in th]
    ok = [x for x in res if x[0] == "ok"]; acked += len(ok)
    print(f"{len(ok)}/{N} plain appends acknowledged; each record's 'schema' field (bytes):", sorted(set(x[2] for x in ok)))
    for x in res:
        if x[0] != "ok": print("  refused:", x[1])
    segs = sorted(((os.path.getsize(os.path.join(data, "p/q/.log", f)), f) for f in os.listdir(os.path.join(data, "p/q/.log"))), reverse=True)
    print("largest log segment:", segs[0])
    s.stop(); s.start()
    try:
        got = read(s.c, "p/q").num_rows
        print("after restart: read", got, "rows; acknowledged", acked)
        if got != acked: bug = True
    except Exception as e:
        print("after restart: read failed:", str(e)[:200]); bug = True
    try:
        # (An append must carry the version's columns, "new" included.)
        put(s.c, {"path": "p/q", "schema_version": "1.1.0"}, pa.table([pa.array([1])] * (n + 1), schema=S1)); print("after restart: a put succeeded")
    except Exception as e:
        print("after restart: put failed:", str(e)[:200]); bug = True
    s.stop()
    v = subprocess.run([QUIVER, "verify", "--data-dir", data], capture_output=True, text=True)
    print("verify exit", v.returncode, (v.stdout + v.stderr)[:400])
    if v.returncode != 0: bug = True
finally:
    s.stop(); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
