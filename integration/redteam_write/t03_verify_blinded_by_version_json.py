#!/usr/bin/env python3
"""t03: one tampered .version.json of an old version blinds verify to the rest of
the profile.

format.md "Verification": verify re-hashes every file against its record and
reports each problem (mutated, missing, ...). After v0/.version.json of an old
(non-latest) version is edited, verify reports a single problem for the whole
profile, kind "missing" ("the profile cannot be verified in full ... its
.version.json ... is not the one its write record vouches for"; CLI advice: "a
committed file is gone: restore it from a backup"), checks 0 files, and does not
report a flipped byte in the latest version's data file nor a deleted data file,
both of which it reports without the .version.json edit. (Reads of the latest
version keep working, so the profile is otherwise served.)
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

def verify(data):
    r = subprocess.run([BIN, "verify", "--data-dir", data, "--json"], capture_output=True, text=True)
    return json.loads(r.stdout)

def main():
    work = tempfile.mkdtemp(prefix="t03_")
    atexit.register(shutil.rmtree, work, True)  # also when a step fails
    data = os.path.join(work, "data")
    s = Server(data)
    try:
        p = "t03/p"
        assert put(s.c, {"path": p, "mode": "write"}, pa.table({"c": [1, 2]}))[0] == "ok"
        assert put(s.c, {"path": p}, pa.table({"c": [3]}))[0] == "ok"
        assert put(s.c, {"path": p, "mode": "write"}, pa.table({"c": [10, 20]}))[0] == "ok"
        assert put(s.c, {"path": p}, pa.table({"c": [30]}))[0] == "ok"
    finally:
        s.stop()
    prof = os.path.join(data, "t03", "p")
    # tamper 1: flip a byte of the latest version's first data file; tamper 2: delete v0/1.parquet
    f = os.path.join(prof, "v1", "0.parquet"); os.chmod(f, 0o644)
    b = bytearray(open(f, "rb").read()); b[len(b) // 3] ^= 0x01; open(f, "wb").write(bytes(b))
    os.remove(os.path.join(prof, "v0", "1.parquet"))
    rep = verify(data)
    base = sorted((x["kind"], x["path"]) for x in rep["problems"])
    print("verify, data files tampered:", rep["checked_files"], "files checked;", base)
    # tamper 3: edit the old version's .version.json
    vj = os.path.join(prof, "v0", ".version.json"); os.chmod(vj, 0o644)
    j = json.loads(open(vj).read()); j["writer"] = "someone else"; open(vj, "w").write(json.dumps(j))
    rep = verify(data)
    got = sorted((x["kind"], x["path"]) for x in rep["problems"])
    print("verify, + v0/.version.json edited:", rep["checked_files"], "files checked;",
          [(x["kind"], x["path"], x["detail"][:110]) for x in rep["problems"]])
    bug = False
    for want in [("mutated", "t03/p/v1/0.parquet"), ("missing", "t03/p/v0/1.parquet")]:
        if want in base and want not in got:
            print("  BUG: no longer reported:", want); bug = True
    if ("mutated", "t03/p/v0/.version.json") not in got:
        print("  BUG: the edited v0/.version.json is not reported as mutated"); bug = True
    shutil.rmtree(work, ignore_errors=True)
    print("BUG PRESENT" if bug else "OK")
    sys.exit(1 if bug else 0)

if __name__ == "__main__":
    main()
