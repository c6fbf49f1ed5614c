"""v03: sweep with older_than_s 0 racing compact and remove-old-versions makes them answer
INTERNAL (cause: the sweep removed the hidden temp of their data file or log segment:
'fsys: commit ...: no such file or directory', 'create exclusive .log/N.ndjson: no such file').
Writes answer UNAVAILABLE in the same race (round 20's u02). Exit 1 while present."""
import os, sys, json, socket, subprocess, tempfile, shutil, time
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))
def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19600, 19700):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")
class Server:
    def __init__(self, data, *extra):
        self.port = free_port(); self.data = data
        self.log = open(os.path.join(os.path.dirname(data.rstrip('/')), f"srv{self.port}.log"), "ab")
        self.p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{self.port}", "--data-dir", data, *extra],
                                  stdout=subprocess.PIPE, stderr=self.log)
        line = self.p.stdout.readline().decode()
        if "serving" not in line: raise SystemExit("server did not start: " + line)
        self.c = fl.FlightClient(f"grpc://127.0.0.1:{self.port}")
    def put(self, path, table, **kw):
        cmd = dict(path=path, **kw)
        w, r = self.c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
        w.write_table(table); w.done_writing(); buf = r.read(); w.close()
        return json.loads(buf.to_pybytes()) if buf is not None else None
    def get(self, path, **kw):
        t = dict(path=path, **kw)
        return self.c.do_get(fl.Ticket(json.dumps(t).encode())).read_all()
    def action(self, typ, body):
        return [json.loads(r.body.to_pybytes()) for r in self.c.do_action(fl.Action(typ, json.dumps(body).encode()))]
    def stop(self):
        try: self.c.close()
        except Exception: pass
        self.p.terminate()
        try: self.p.wait(10)
        except Exception: self.p.kill(); self.p.wait()
def verify_dir(data, prefix=None):
    args = [QUIVER, "verify", "--data-dir", data, "--json"] + ([prefix] if prefix else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    try: j = json.loads(r.stdout)
    except Exception: j = None
    return r.returncode, j, r.stdout, r.stderr
def sweep_dir(data, older="0s"):
    r = subprocess.run([QUIVER, "sweep", "--data-dir", data, "--json", "--older-than", older], capture_output=True, text=True, timeout=60)
    try: j = json.loads(r.stdout)
    except Exception: j = None
    return r.returncode, j, r.stdout, r.stderr
import threading
def main():
    d = tempfile.mkdtemp(); data = os.path.join(d, "data"); internal = []; counts = {"compact": 0, "retire": 0, "append": 0}
    s = Server(data)
    try:
        for p in ("r/pq", "r/csv"):
            s.put(p, pa.table({"a": list(range(100))}), mode="write", **({"format": "csv"} if p == "r/csv" else {}))
        stop = time.time() + float(os.environ.get("DUR", "45"))
        def work(kind, prof):
            c = fl.FlightClient(f"grpc://127.0.0.1:{s.port}"); n = 0
            while time.time() < stop and len(internal) < 3:
                n += 1
                try:
                    if kind == "compact": list(c.do_action(fl.Action("compact", json.dumps({"path": prof}).encode())))
                    elif kind == "retire": list(c.do_action(fl.Action("remove-old-versions", json.dumps({"path": prof, "keep": 1, "grace_s": 0}).encode())))
                    else:
                        t = pa.table({"a": [n]}); cmd = {"path": prof}
                        if prof == "r/csv": cmd["format"] = "csv"
                        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), t.schema); w.write_table(t); w.done_writing(); r.read(); w.close()
                    counts[kind] += 1
                except fl.FlightInternalError as e:
                    if "data loss" not in str(e): internal.append((kind, prof, str(e)[:120]))
                except fl.FlightError: pass
        def sweep():
            c = fl.FlightClient(f"grpc://127.0.0.1:{s.port}")
            while time.time() < stop and len(internal) < 3:
                try: list(c.do_action(fl.Action("sweep", json.dumps({"older_than_s": 0}).encode())))
                except fl.FlightError: pass
        ts = [threading.Thread(target=work, args=a) for a in [("compact", "r/pq"), ("compact", "r/csv"), ("retire", "r/pq"), ("retire", "r/csv"), ("append", "r/pq"), ("append", "r/csv")]]
        ts += [threading.Thread(target=sweep), threading.Thread(target=sweep)]
        for t in ts: t.start()
        for t in ts: t.join()
        print("done:", counts)
        for e in internal: print("INTERNAL:", e)
    finally: s.stop()
    logf = os.path.join(d, f"srv{s.port}.log")
    for line in open(logf, errors="replace"):
        if '"status":"Internal"' in line:
            try: print("  server cause:", json.loads(line).get("cause", "")[:200])
            except Exception: pass
    shutil.rmtree(d, ignore_errors=True)
    print("BUG PRESENT" if internal else "fixed"); sys.exit(1 if internal else 0)
main()
