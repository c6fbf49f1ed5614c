#!/usr/bin/env python3
"""t05: CSV append checks on number/boolean text are inconsistent: some values
are accepted and read back changed, equivalent valid ones are refused.

format.md: an append's text "must be one of its column's inferred type" and "a
string into a column that is not text must also read back as written"; "no
lossy casts"; "a number-looking string no float64 holds (1e400, -nan)" is refused.
Into a CSV column the files make Float64 / Boolean:
 (a) the string "9007199254740993" is acknowledged and reads back 9007199254740992.0,
     while the int64 9007199254740993 is refused as lossy ("not in range");
 (b) the string "1e-400" is acknowledged and reads back 0.0 (and "-1e-400" as -0.0),
     while "1e400" is refused as a number no float64 holds;
 (c) the string "-0" is refused ("would not read back") though it reads back as
     -0.0 exactly like the accepted "-0.0" and "-0e0";
 (d) "tRuE" is refused into a Boolean column with Go's "strconv.ParseBool: parsing
     "tRuE": invalid syntax", although a CSV write of "tRuE" is inferred as a
     Boolean and reads back True.
Exit 1 when any of these is present, 0 when fixed.
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
    s = Server(os.path.join(work, "data"))
    bugs = []
    n = [0]
    def one(base, val):
        n[0] += 1; p = f"t05/p{n[0]}"
        st, r = put(s.c, {"path": p, "format": "csv", "mode": "write"}, pa.table({"c": base}))
        assert st == "ok", r
        st, r = put(s.c, {"path": p}, pa.table({"c": val}))
        back = get(s.c, p).column("c").to_pylist() if st == "ok" else None
        return st, r, back
    try:
        st, r, _ = one([1.5], pa.array([2**53 + 1], pa.int64()))
        print("(a) int64 9007199254740993 into Float64:", st, r if st == "err" else "")
        st2, r2, back = one([1.5], pa.array(["9007199254740993"]))
        print("    string '9007199254740993' into Float64:", st2, back)
        if st == "err" and st2 == "ok" and back[-1] != 9007199254740993:
            bugs.append("(a) lossy numeric string accepted")
        st, r, _ = one([1.5], pa.array(["1e400"]))
        print("(b) '1e400' into Float64:", st, r[:80] if st == "err" else "")
        st2, r2, back = one([1.5], pa.array(["1e-400"]))
        print("    '1e-400' into Float64:", st2, back)
        if st == "err" and st2 == "ok" and back[-1] == 0.0:
            bugs.append("(b) underflowing number accepted, reads back 0.0")
        st, r, back = one([1.5], pa.array(["-0.0"]))
        st2, r2, back2 = one([1.5], pa.array(["-0"]))
        print("(c) '-0.0' into Float64:", st, back, "| '-0':", st2, r2 if st2 == "err" else back2)
        if st == "ok" and st2 == "err":
            bugs.append("(c) '-0' refused in a Float64 column")
        n[0] += 1; p = f"t05/p{n[0]}"
        st, r = put(s.c, {"path": p, "format": "csv", "mode": "write"}, pa.table({"c": ["tRuE", "false"]}))
        w = get(s.c, p)
        print("(d) write of 'tRuE': reads back", w.schema.field("c").type, w.column("c").to_pylist())
        st2, r2, back = one([True], pa.array(["tRuE"]))
        print("    append 'tRuE' into Boolean:", st2, r2 if st2 == "err" else back)
        if str(w.schema.field("c").type) == "bool" and st2 == "err":
            bugs.append("(d) 'tRuE' refused with " + ("a Go parser message" if "strconv" in r2 else "an error"))
    finally:
        s.stop()
    shutil.rmtree(work, ignore_errors=True)
    print("BUGS:", bugs if bugs else "none")
    sys.exit(1 if bugs else 0)

if __name__ == "__main__":
    main()
