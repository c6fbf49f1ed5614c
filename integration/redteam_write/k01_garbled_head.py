#!/usr/bin/env python3
"""k01 (follow-up to round 17's j01): a rewritten last commit record whose
.log/HEAD is garbled as well is laundered by the next ordinary put of a
freshly started server. j01's fix refuses a log whose HEAD names a record
it holds with other bytes, but a HEAD that does not parse was ignored: the
server chained a new record onto the rewritten one and replaced HEAD, and
`verify` then reported nothing.

Docs: format.md "The hash chain": a HEAD is written whole (its content
synced before it is renamed over the old one), so no crash leaves one that
does not parse; a log whose HEAD is unreadable is refused with DATA_LOSS.

Exit 0 when the bug is absent: after the tamper, reads and puts of the
profile are refused with DATA_LOSS (naming no server path), nothing is
written to it, verify still reports it, and the other profile of the data
dir is still listed and served.
"""
import os, sys, json, glob, shutil, socket, subprocess, tempfile, time, hashlib
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    import random
    ports = list(range(19800, 19900)); random.shuffle(ports)
    for p in ports:
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise RuntimeError("no free port in 19800-19899")

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

def put(c, path, t, rid, mode="append"):
    cmd = {"path": path, "request_id": rid, "mode": mode}
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), t.schema)
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

def tree(d):
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(root, n)
            st = os.lstat(p)
            body = ""
            if os.path.isfile(p) and not os.path.islink(p):
                body = hashlib.sha256(open(p, "rb").read()).hexdigest()
            out[os.path.relpath(p, d)] = (st.st_mode, body)
    return out

def refused(what, fn, data):
    """None if fn was refused with DATA_LOSS naming no server path, else why not."""
    try:
        fn()
    except fl.FlightError as e:
        msg = str(e)
        print(f"{what} refused: {msg.split('. gRPC')[0][:200]}")
        if "data loss" not in msg.lower():
            return f"{what} refused, but not with DATA_LOSS: {msg[:200]}"
        if data in msg or os.path.dirname(data) in msg:
            return f"{what}: the message names a server path: {msg[:200]}"
        return None
    return f"{what} was accepted"

def main():
    base = tempfile.mkdtemp(prefix="rt17-k01-", dir="/tmp")
    data = os.path.join(base, "data")
    srv = Server(data)
    try:
        c = srv.start()
        put(c, "audit/other", pa.table({"amount": pa.array([1, 2], pa.int64())}), "o1")
        put(c, "audit/ledger", pa.table({"amount": pa.array([10, 20, 30], pa.int64())}), "r1")
        rec = put(c, "audit/ledger", pa.table({"amount": pa.array([40, 50, 60], pa.int64())}), "r2")
        srv.stop()
        prof = os.path.join(data, "audit", "ledger")
        # Someone with storage access changes the last append's data (same
        # row count), rewrites its record's size and hash to match (j01),
        # and garbles HEAD so that it names nothing.
        f = rec["files"][0]
        fpath = os.path.join(prof, f["path"])
        t = pq.read_table(fpath)
        t2 = t.set_column(0, "amount", pa.array([4000, 5000, 6000], pa.int64()))
        os.chmod(fpath, 0o644); os.remove(fpath)
        pq.write_table(t2, fpath, compression="zstd")
        newb = open(fpath, "rb").read()
        segs = sorted(glob.glob(os.path.join(prof, ".log", "0*.ndjson")))
        seg = segs[-1]
        line = open(seg).read()
        line2 = line.replace(f["sha256"], hashlib.sha256(newb).hexdigest()).replace(f'"bytes":{f["bytes"]}', f'"bytes":{len(newb)}')
        assert line2 != line
        os.chmod(seg, 0o644); open(seg, "w").write(line2); os.chmod(seg, 0o444)
        head = os.path.join(prof, ".log", "HEAD")
        os.chmod(head, 0o644)
        open(head, "wb").write(b"\x00garbled head\n")
        v1 = verify(data)
        if v1["ok"]:
            print("SETUP: verify did not see the tampering at all (other bug)"); return 1
        print("verify after the tamper:", [(p["kind"], p["path"], p["detail"][:90]) for p in v1["problems"]])
        before = tree(data)
        # A freshly started server: the other profile is listed and served,
        # the tampered one is refused.
        c = srv.start()
        problems = []
        listed = {tuple(i.descriptor.path): i.total_records for i in c.list_flights()}
        print("listed:", listed)
        other = listed.get((b"audit", b"other"), listed.get(("audit", "other")))
        if other is None:
            problems.append("the other profile is not listed")
        elif other != 2:
            problems.append(f"the other profile is listed with {other} rows, want 2")
        rows = c.do_get(fl.Ticket(b"audit/other")).read_all().column("amount").to_pylist()
        if rows != [1, 2]:
            problems.append(f"the other profile served {rows}")
        for what, fn in [
            ("read", lambda: c.do_get(fl.Ticket(b"audit/ledger")).read_all()),
            ("put", lambda: put(c, "audit/ledger", pa.table({"amount": pa.array([70], pa.int64())}), "r3")),
            ("write of a new version", lambda: put(c, "audit/ledger", pa.table({"amount": pa.array([80], pa.int64())}), "r4", mode="write")),
        ]:
            why = refused(what, fn, data)
            if why:
                problems.append(why)
        srv.stop()
        after = tree(data)
        changed = sorted(k for k in set(before) | set(after)
                         if k.startswith(os.path.join("audit", "ledger")) and before.get(k) != after.get(k))
        if changed:
            problems.append(f"the tampered profile changed on disk: {changed}")
        if len(glob.glob(os.path.join(prof, ".log", "0*.ndjson"))) != len(segs):
            problems.append("a record was chained onto the rewritten one")
        v2 = verify(data)
        print("verify after the put:", v2["ok"], [(p["kind"], p["path"], p["detail"][:90]) for p in v2["problems"]])
        if v2["ok"]:
            problems.append("verify is clean after the put: the tampering was laundered")
        if problems:
            for p in problems:
                print("BUG:", p)
            return 1
        print("OK: bug absent"); return 0
    finally:
        srv.stop(); shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
