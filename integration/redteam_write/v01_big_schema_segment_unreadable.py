"""v01: an acknowledged schema-evolving append whose record (base64 schema) passes 64 MiB
makes the whole profile unreadable after a restart (DATA_LOSS 'a metadata file larger than
64 MiB, more than Quiver ever writes'), every later put refused, verify reports 'unknown'.
Exit 1 while present."""
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
def main():
    d = tempfile.mkdtemp(); data = os.path.join(d, "data"); bad = False
    try:
        s = Server(data)
        try:
            s.put("p/a", pa.table({"a": [1]}), mode="write", schema_version="1.0.0")
            cols = {"a": pa.array([2])}
            for i in range(48): cols[f"c{i:02d}_" + "x" * (1 << 20)] = pa.array([None], pa.int64())
            try:
                r = s.put("p/a", pa.table(cols), schema_version="1.1.0")
                print("evolving append acknowledged: seq", r["seq"])
                seg = os.path.join(data, "p/a/.log/%020d.ndjson" % r["seq"])
                print("its segment:", os.path.getsize(seg), "bytes")
            except pa.ArrowInvalid as e:
                # Refusing the put is the fix's other outcome.
                print("evolving append refused:", str(e)[:200])
        finally: s.stop()
        s = Server(data)
        try:
            try: print("read after restart:", s.get("p/a").num_rows, "rows")
            except Exception as e: bad = True; print("read after restart FAILED:", str(e)[:200])
            try: print("put after restart: seq", s.put("p/a", pa.table({"a": [3]}))["seq"])
            except Exception as e: bad = True; print("put after restart FAILED:", str(e)[:200])
        finally: s.stop()
        rc, j, out, err = verify_dir(data)
        print("verify rc", rc, [(p["kind"], p["detail"][:160]) for p in (j or {}).get("problems", [])])
        if rc != 0: bad = True
    finally: shutil.rmtree(d, ignore_errors=True)
    print("BUG PRESENT" if bad else "fixed"); sys.exit(1 if bad else 0)
main()
