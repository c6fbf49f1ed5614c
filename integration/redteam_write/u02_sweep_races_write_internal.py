"""u02: `sweep` with older_than 0 racing puts of mode "write" (and compaction)
removes the version directory a write has just reserved (mkdir vN) before its
.version.json exists; the write then fails INTERNAL ("internal error (see
server log)"; log cause: create exclusive ".../vN/.version.json": no such file
or directory) instead of UNAVAILABLE ("nothing was committed; retry").
Exit 1 while any put answers INTERNAL."""
import os, sys, json, time, socket, subprocess, tempfile, shutil, threading
import pyarrow as pa, pyarrow.flight as fl
from collections import Counter
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))
def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19700, 19800):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")
def cmd(**kw): return fl.FlightDescriptor.for_command(json.dumps(kw).encode())
def put(c, t, **kw):
    w, r = c.do_put(cmd(**kw), t.schema); w.write_table(t); w.done_writing(); b = r.read(); w.close()
    return json.loads(b.to_pybytes())
tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d"); port = free_port()
log = open(os.path.join(tmp, "server.log"), "wb")
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data], stdout=subprocess.PIPE, stderr=log)
rc = 1
try:
    assert b"serving" in p.stdout.readline()
    addr = f"grpc://127.0.0.1:{port}"
    c = fl.FlightClient(addr)
    put(c, pa.table({"id": [0]}), path="k/p", mode="write")
    stop = False; codes = Counter(); acked = []
    def writer(i):
        cc = fl.FlightClient(addr); n = 0
        while not stop:
            n += 1
            try:
                r = put(cc, pa.table({"id": [i * 100000 + n]}), path="k/p", mode="write"); acked.append(r["version"]); codes["OK"] += 1
            except fl.FlightError as e:
                codes[type(e).__name__ + ": " + str(e).split("\n")[0][:90]] += 1
    def sweeper():
        cc = fl.FlightClient(addr)
        while not stop:
            list(cc.do_action(fl.Action("sweep", json.dumps({"older_than_s": 0}).encode())))
    ths = [threading.Thread(target=writer, args=(i,)) for i in range(3)] + [threading.Thread(target=sweeper) for _ in range(2)]
    for t in ths: t.start()
    deadline = time.time() + 40
    while time.time() < deadline and not any("internal" in k for k in codes): time.sleep(0.5)
    stop = True
    for t in ths: t.join()
    for k, v in codes.items(): print(f"{v:6d}  {k}")
    internal = [k for k in codes if "internal" in k.lower()]
    log.flush()
    for line in open(os.path.join(tmp, "server.log")):
        if '"Internal"' in line: print("server log cause:", json.loads(line).get("cause")); break
    print("expected: a write whose reserved version sweep removed is refused UNAVAILABLE (nothing committed)")
    print("actual:", "INTERNAL answered" if internal else "no INTERNAL seen")
    lost = []
    for v in set(acked):
        try: c.do_get(fl.Ticket(json.dumps({"path": "k/p", "version": v}).encode())).read_all()
        except fl.FlightError as e: lost.append((v, str(e).split("\n")[0][:120]))
    vr = json.loads(list(c.do_action(fl.Action("verify", b"{}")))[0].body.to_pybytes())
    print("acknowledged writes unreadable:", lost[:5], "verify problems:", [(q["kind"], q["path"]) for q in vr["problems"]][:5])
    rc = 1 if internal or lost or not vr["ok"] else 0
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp)
sys.exit(rc)
