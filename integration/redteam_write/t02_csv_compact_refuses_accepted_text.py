#!/usr/bin/env python3
"""t02: a CSV version whose appends the server accepted cannot be compacted.

format.md (CSV rules, s07 fix): "05", "-0", "1e400", "-nan" and a uint64 above
int64 are accepted by an append into a column "that the version's files already
make text", where they read back as written.  Compaction ("Store.Compact reads
the latest version and writes it as a new version"; "Compaction keeps the schema
and is always allowed") re-applies the *write* rule to the same values and fails
INVALID_ARGUMENT, blaming the data ("reads back as a number without its sign or
leading zeros"), although the compacted file would read back exactly as the old
ones do (the column is text there too). --auto-compact would fail the same way.
Exit 1 when the bug is present, 0 when fixed.
"""
import json, os, tempfile, shutil, socket, subprocess, sys, threading, time
import pyarrow as pa, pyarrow.flight as fl

BIN = os.environ.get("QUIVER", os.environ.get("QUIVER_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver")))

def free_port():
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
    work = tempfile.mkdtemp(prefix="quiver-redteam-")
    data = os.path.join(work, "data")
    s = Server(data)
    bug = False
    try:
        for i, val in enumerate([pa.array(["05"]), pa.array(["-0"]), pa.array(["1e400"]),
                                 pa.array([2**64 - 1], pa.uint64())]):
            p = f"t02/p{i}"
            st, r = put(s.c, {"path": p, "format": "csv", "mode": "write"}, pa.table({"s": ["x", "y"]}))
            assert st == "ok", r
            st, r = put(s.c, {"path": p}, pa.table({"s": val}))
            print(f"append {val.to_pylist()} into text column:", st, "" if st == "ok" else r)
            if st != "ok":
                continue
            before = get(s.c, p).column("s").to_pylist()
            print("  reads back:", before)
            try:
                res = action(s.c, "compact", {"path": p})[0]
                after = get(s.c, p).column("s").to_pylist()
                print("  compact ->", res["version"], "reads back:", after)
                if after != before:
                    print("  BUG: compaction changed the rows"); bug = True
            except Exception as e:
                m = str(e).split("message: ")[-1].split(" gRPC client")[0]
                print("  BUG: compact refused:", type(e).__name__, m)
                bug = True
    finally:
        s.stop()
    shutil.rmtree(work, ignore_errors=True)
    print("BUG PRESENT" if bug else "OK")
    sys.exit(1 if bug else 0)

if __name__ == "__main__":
    main()
