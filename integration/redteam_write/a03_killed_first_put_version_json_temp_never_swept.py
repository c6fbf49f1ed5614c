"""a03: a first put killed while it writes its `.version.json` leaves
`P/v0/.<id>..version.json.tmp` (and the directories `P/` and `P/v0/`) that
`verify` never reports and `sweep` never removes, at any age.

What is wrong: `kill -9` of the server while first puts of new profiles start
(the window is the temp's write and fsync before it becomes `.version.json`)
leaves a version directory holding only that hidden temp. Seen three times in
15 kill rounds of a kill -9 loop. After the restart, `verify` is `ok: true`
and `sweep {"older_than_s": 0}` / offline `quiver sweep --older-than 0s`
remove nothing — even after the leftovers' times are set 3 hours back, where a
hidden temp anywhere else is `stale_temp` for verify and removed by sweep.
The script reproduces it with a kill loop (up to 30 rounds of 8 concurrent
first puts); should no round land in the window it plants the same leftover
(the killed server's own `.version.json` content under the temp name it uses).

Promise contradicted: operations.md "Locks, crashes and recovery" ("A put
killed while it created its profile leaves a directory with no manifest ...;
verify reports and sweep removes what is in it by the same rules, and then the
directory"); format.md "Sweep" (its temps are swept) and the `stale_temp`
kind ("a hidden *.tmp not written for the stale threshold"). Severity: LOW
(a small leak and a silent audit; no data affected).

Exit 1 while the bug is present, 0 when fixed.
"""
import json, os, pathlib, shutil, signal, socket, subprocess, sys, tempfile, threading, time
import pyarrow as pa
import pyarrow.flight as fl

Q = os.environ.get("QUIVER", str(pathlib.Path(__file__).resolve().parents[2] / "bin" / "quiver"))


def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            pass
        finally:
            s.close()
    raise RuntimeError("no free port in 19500-19599")


def start(data, port):
    p = subprocess.Popen(["nice", "-n", "10", Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data,
                          "--log-level", "error"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline()
    if b"serving" not in line:
        p.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return p, fl.connect(f"grpc://127.0.0.1:{port}")


def action(c, t, body):
    return [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action(t, json.dumps(body).encode()))]


def temps(data):
    out = []
    for root, dirs, files in os.walk(data):
        for f in files:
            if f.endswith("..version.json.tmp"):
                out.append(os.path.relpath(os.path.join(root, f), data))
    return out


def first_put(port, path, t):
    try:
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, "mode": "write"})), t.schema)
        w.write_table(t)
        w.done_writing()
        r.read()
        w.close()
    except Exception:
        pass


def main():
    data = tempfile.mkdtemp(prefix="rt26-a03-", dir="/tmp")
    port = free_port()
    srv = None
    t = pa.table({"id": pa.array(range(100), pa.int64())})
    try:
        found = []
        for rd in range(30):
            srv, c = start(data, port)
            ths = [threading.Thread(target=first_put, args=(port, f"k{rd}/p{j}", t)) for j in range(8)]
            for th in ths:
                th.start()
            time.sleep(0.002 + 0.004 * (rd % 10))
            srv.send_signal(signal.SIGKILL)
            srv.wait()
            srv = None
            for th in ths:
                th.join()
            c.close()
            found = temps(data)
            if found:
                print(f"kill round {rd}: left {found}")
                break
        if not found:
            print("no kill round landed in the window; planting the same leftover")
            srv, c = start(data, port)
            w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "src", "mode": "write"})), t.schema)
            w.write_table(t)
            time.sleep(0.5)
            body = open(os.path.join(data, "src/v0/.version.json"), "rb").read()
            srv.send_signal(signal.SIGKILL)
            srv.wait()
            srv = None
            c.close()
            os.makedirs(os.path.join(data, "planted/p/v0"))
            with open(os.path.join(data, "planted/p/v0/.5a6752266721597791569d084e9ae631..version.json.tmp"), "wb") as f:
                f.write(body[: len(body) // 2])
            found = temps(data)
        old = time.time() - 3 * 3600
        for rel in found:
            d = os.path.join(data, rel)
            while os.path.dirname(d) != data.rstrip("/"):
                os.utime(d, (old, old))
                d = os.path.dirname(d)
            os.utime(d, (old, old))
        # Verify offline first: the server's start-up sweep (1 h) removes
        # leftovers this old (the fix) before an online verify could see them.
        v = json.loads(subprocess.run([Q, "verify", "--data-dir", data, "--json"], capture_output=True, text=True).stdout)
        srv, c = start(data, port)
        mine = lambda path: any(path == rel or rel.startswith(path + "/") for rel in found)
        print("verify ok:", v["ok"], "- problems about the leftovers:", [p for p in v["problems"] if mine(p["path"])])
        sw = action(c, "sweep", {"older_than_s": 0})[0]
        print("sweep older_than_s 0 removed of the leftovers:", [x for x in sw["removed"] if mine(x)])
        c.close()
        srv.send_signal(signal.SIGTERM)
        srv.wait(30)
        srv = None
        off = subprocess.run([Q, "sweep", "--data-dir", data, "--older-than", "0s", "--json"], capture_output=True, text=True)
        print("offline sweep removed of the leftovers:", [x for x in json.loads(off.stdout)["removed"] if mine(x)])
        left = temps(data)
        reported = any(any(p["path"] == rel or rel.startswith(p["path"] + "/") for rel in found) for p in v["problems"])
        print("still there:", left, "reported by verify:", reported)
        if left or not reported:
            print("BUG: the killed first put's .version.json temp is never reported or swept")
            return 1
        print("fixed")
        return 0
    finally:
        if srv is not None:
            srv.kill()
            srv.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
