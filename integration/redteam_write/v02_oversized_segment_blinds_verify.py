"""v02: one log segment padded past 64 MiB makes verify give up on the whole profile
('unknown ... cannot be verified in full'): no chain_broken for the segment, and an altered
committed data file of the same profile is not reported (no 'mutated'). Exit 1 while present."""
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
import glob, pyarrow.parquet as pq
def main():
    d = tempfile.mkdtemp(); data = os.path.join(d, "data"); bad = False
    try:
        s = Server(data)
        try:
            s.put("p/a", pa.table({"a": [1, 2, 3]}), mode="write")
            for i in range(3): s.put("p/a", pa.table({"a": [10 * i, 10 * i + 1]}))
        finally: s.stop()
        segs = sorted(glob.glob(data + "/p/a/.log/0*.ndjson"))
        # damage segment 3: its record intact, then one 65 MiB garbage line
        os.chmod(segs[2], 0o644); open(segs[2], "ab").write(b"x" * (65 << 20) + b"\n")
        # alter the committed file of record 2 (another, intact segment)
        f = data + "/p/a/v0/1.parquet"; os.chmod(f, 0o644)
        pq.write_table(pa.table({"a": [7, 7]}), f + ".x"); os.replace(f + ".x", f)
        rc, j, out, err = verify_dir(data)
        probs = (j or {}).get("problems", [])
        for p in probs: print("  ", p["kind"], p["path"], "|", p["detail"][:160])
        kinds = {(p["kind"], p["path"]) for p in probs}
        if ("mutated", "p/a/v0/1.parquet") not in kinds: bad = True; print("altered p/a/v0/1.parquet NOT reported mutated")
        if not any(k == "chain_broken" for k, _ in kinds): bad = True; print("oversized segment not reported chain_broken")
    finally: shutil.rmtree(d, ignore_errors=True)
    print("BUG PRESENT" if bad else "fixed"); sys.exit(1 if bad else 0)
main()
