#!/usr/bin/env python3
"""t04: a put onto a commit log with a blank line in a segment is answered
INVALID_ARGUMENT "put <profile>" instead of DATA_LOSS.

protocol.md Errors: DataLoss for "a commit log truncated, corrupt or copied from
another profile"; InvalidArgument is for bad requests. With an empty line added
to a segment (the end of the last one, or the start of an earlier one), reads
and compaction of the profile answer DATA_LOSS "corrupt file in the store
(...); run the verify action", and verify reports chain_broken, but every put
(append or write) is answered INVALID_ARGUMENT with the bare message
"put t04/p": the client is told its request was bad, and nothing says the log
is corrupt. (Nothing is written: the refusal itself is right.)
Exit 1 when the bug is present, 0 when fixed.
"""
import atexit, json, os, shutil, socket, subprocess, sys, tempfile, threading, time
import pyarrow as pa, pyarrow.flight as fl

BIN = os.environ.get("QUIVER") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19900, 20000):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise RuntimeError("no free port")

class Server:
    def __init__(self, data, *extra):
        self.port = free_port()
        self.p = subprocess.Popen([BIN, "serve", "--addr", f"127.0.0.1:{self.port}", "--data-dir", data, *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if b"serving" not in self.p.stdout.readline():
            raise RuntimeError("server did not start")
        self.c = fl.connect(f"grpc://127.0.0.1:{self.port}")
    def stop(self):
        try: self.c.close()
        except Exception: pass
        self.p.terminate()
        try: self.p.wait(10)
        except Exception: self.p.kill(); self.p.wait()

def put(c, cmd, table):
    """Returns ("ok", record) or ("err", message)."""
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
    try:
        w.write_table(table); w.done_writing()
        buf = r.read()
        w.close()
        return "ok", json.loads(buf.to_pybytes())
    except Exception as e:
        try: w.close()
        except Exception as e2: e = e2
        m = str(e)
        if "message: " in m: m = m.split("message: ", 1)[1].split(" gRPC client debug")[0]
        return "err", f"{type(e).__name__}: {m}"

def get(c, path):
    return c.do_get(fl.Ticket(json.dumps({"path": path}).encode())).read_all()

def action(c, name, body):
    return [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action(name, json.dumps(body).encode()))]

def snapshot(d):
    out = {}
    for root, dirs, files in os.walk(d):
        for f in files + dirs:
            p = os.path.join(root, f); rel = os.path.relpath(p, d)
            if os.path.islink(p): out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p): out[rel] = ("dir",)
            else: out[rel] = ("file", open(p, "rb").read())
    return out

def main():
    work = tempfile.mkdtemp(prefix="t04_")
    atexit.register(shutil.rmtree, work, True)  # also when a step fails
    data = os.path.join(work, "data")
    s = Server(data)
    p = "t04/p"
    try:
        for i in range(3):
            assert put(s.c, {"path": p}, pa.table({"c": [i]}))[0] == "ok"
    finally:
        s.stop()
    seg = os.path.join(data, "t04", "p", ".log", "%020d.ndjson" % 3)
    os.chmod(seg, 0o644)
    open(seg, "ab").write(b"\n")          # one blank line at the end of the last segment
    before = snapshot(data)
    s = Server(data)
    bug = False
    try:
        try:
            get(s.c, p); print("read: served")
        except Exception as e:
            print("read:", type(e).__name__, str(e).split("message: ")[-1].split(" gRPC")[0])
        for cmd in ({"path": p}, {"path": p, "mode": "write"}):
            st, r = put(s.c, cmd, pa.table({"c": [9]}))
            print(f"put {cmd}:", st, r)
            if st == "err" and (r.startswith("ArrowInvalid") or "data loss" not in r.lower() and "lost or altered" not in r and "corrupt" not in r):
                print("  BUG: expected DATA_LOSS naming the corrupt log, got the above"); bug = True
    finally:
        s.stop()
    if snapshot(data) != before:
        print("note: the data directory changed")
    shutil.rmtree(work, ignore_errors=True)
    print("BUG PRESENT" if bug else "OK")
    sys.exit(1 if bug else 0)

if __name__ == "__main__":
    main()
