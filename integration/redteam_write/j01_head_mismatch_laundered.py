#!/usr/bin/env python3
"""j01: a rewritten last commit record, which `verify` reports (the log HEAD
names another hash), is laundered by the next ordinary put of a freshly
started server: the server chains a new record onto the rewritten one,
overwrites .log/HEAD, and `verify` then reports nothing.

Docs: format.md "The hash chain" / "Verification": chain_broken covers "a HEAD
that names another hash"; reads and commits trust nothing ("a commit log
truncated, corrupt ... DataLoss"); a truncated log (HEAD ahead) is refused
with DATA_LOSS, but a rewritten last record is accepted and its evidence erased.

Exit 0 when the bug is absent: after the tamper, either the put is refused
(DATA_LOSS) or verify still reports the tampering after the put.
"""
import os, sys, json, glob, shutil, socket, subprocess, tempfile, time, hashlib
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    import random
    ports = list(range(19700, 19800)); random.shuffle(ports)
    for p in ports:
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise RuntimeError("no free port in 19700-19799")

class Server:
    def __init__(self, data): self.data = data; self.port = free_port(); self.p = None
    def start(self):
        self.p = subprocess.Popen([QUIVER, "serve", "--data-dir", self.data, "--addr", f"127.0.0.1:{self.port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(400):
            try: socket.create_connection(("127.0.0.1", self.port), 0.2).close(); return fl.connect(f"grpc://127.0.0.1:{self.port}")
            except OSError: time.sleep(0.05)
        raise RuntimeError("server did not start")
    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            try: self.p.wait(10)
            except subprocess.TimeoutExpired: self.p.kill(); self.p.wait()

def put(c, path, t, rid):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, "request_id": rid})), t.schema)
    w.write_table(t); w.done_writing()
    try:
        buf = r.read()
    finally:
        w.close()  # raises the put's status, if it failed
    if buf is None: raise RuntimeError("no PutResult")
    return json.loads(buf.to_pybytes())

def verify(data):
    r = subprocess.run([QUIVER, "verify", "--data-dir", data, "--json"], capture_output=True, text=True)
    return json.loads(r.stdout)

def main():
    base = tempfile.mkdtemp(prefix="rt17-j01-", dir="/tmp")
    data = os.path.join(base, "data")
    srv = Server(data)
    try:
        c = srv.start()
        put(c, "audit/ledger", pa.table({"amount": pa.array([10, 20, 30], pa.int64())}), "r1")
        rec = put(c, "audit/ledger", pa.table({"amount": pa.array([40, 50, 60], pa.int64())}), "r2")
        srv.stop()
        prof = os.path.join(data, "audit", "ledger")
        # Someone with storage access changes the last append's data (same row count)
        # and rewrites its record's size and hash to match.
        f = rec["files"][0]
        fpath = os.path.join(prof, f["path"])
        t = pq.read_table(fpath)
        t2 = t.set_column(0, "amount", pa.array([4000, 5000, 6000], pa.int64()))
        os.chmod(fpath, 0o644); os.remove(fpath)
        pq.write_table(t2, fpath, compression="zstd")
        newb = open(fpath, "rb").read()
        seg = sorted(glob.glob(os.path.join(prof, ".log", "0*.ndjson")))[-1]
        line = open(seg).read()
        line2 = line.replace(f["sha256"], hashlib.sha256(newb).hexdigest()).replace(f'"bytes":{f["bytes"]}', f'"bytes":{len(newb)}')
        assert line2 != line
        os.chmod(seg, 0o644); open(seg, "w").write(line2); os.chmod(seg, 0o444)
        v1 = verify(data)
        if v1["ok"]:
            print("SETUP: verify did not see the rewritten record at all (other bug)"); return 1
        print("verify after the tamper:", [(p["kind"], p["detail"][:90]) for p in v1["problems"]])
        # An ordinary put through a freshly started server.
        c = srv.start()
        try:
            r3 = put(c, "audit/ledger", pa.table({"amount": pa.array([70], pa.int64())}), "r3")
            print("put after the tamper was accepted as record", r3.get("seq"))
        except fl.FlightError as e:
            print("put after the tamper refused:", str(e)[:150]); print("OK: bug absent"); return 0
        rows = c.do_get(fl.Ticket(b"audit/ledger")).read_all().column("amount").to_pylist()
        srv.stop()
        v2 = verify(data)
        print("verify after the put:", v2["ok"], [(p["kind"], p["detail"][:90]) for p in v2["problems"]])
        print("rows served:", rows)
        if v2["ok"]:
            print("BUG: the next put laundered a rewritten commit record: verify reported chain_broken before it and is clean after it, while the altered rows", rows[3:6], "are served")
            return 1
        print("OK: bug absent"); return 0
    finally:
        srv.stop(); shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
