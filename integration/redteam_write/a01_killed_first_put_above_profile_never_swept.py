"""a01: a first put of profile `n` killed after `n/c` was created leaves its
version (and its data file) in `n/` for good: `verify` says ok, `sweep` (any
age) removes nothing.

What is wrong: a client starts the first put of profile `n` (an unpartitioned
write) and streams part of it; meanwhile another client creates profile `n/c`
(so `n` becomes a parent directory). The server is then killed (`kill -9`)
while `n`'s put is still streaming. After the restart `n/v0/.version.json`
and `n/v0/.<id>.0.parquet.tmp` (a hidden temp holding the rows the killed put
had streamed) stay forever, even aged 3 hours: `verify` reports `ok: true` with no problem, and `sweep
{"older_than_s": 0}` (and offline `quiver sweep --older-than 0s`) removes
nothing (the temp is not even reported `stale_temp`).

Promise contradicted: operations.md "Locks, crashes and recovery": "A put
killed while it created its profile leaves a directory with no manifest that
no listing shows; verify reports and sweep removes what is in it by the same
rules"; format.md "Sweep" (a directory where a put creating a profile was
killed — its versions holding a `.version.json` are swept). The mirror case
(`n` committed, `n/c`'s first put killed) is reported `orphan` and swept, so
only this direction leaks. Severity: MEDIUM (a killed large write leaks its
whole size on disk, invisible to the audit; no committed data affected).

Exit 1 while the bug is present, 0 when fixed.
"""
import json, os, pathlib, shutil, signal, socket, subprocess, sys, tempfile, time
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


def tree(data):
    out = []
    for root, dirs, files in os.walk(data):
        for f in files:
            out.append(os.path.relpath(os.path.join(root, f), data))
    return sorted(out)


def main():
    data = tempfile.mkdtemp(prefix="rt26-a01-", dir="/tmp")
    port = free_port()
    srv = None
    try:
        srv, c = start(data, port)
        n = 300_000
        t = pa.table({"id": pa.array(range(n), pa.int64()), "s": pa.array([f"row-{i}" for i in range(n)])})
        desc = fl.FlightDescriptor.for_command(json.dumps({"path": "n", "mode": "write"}))
        w, r = c.do_put(desc, t.schema)
        for i in range(0, 200_000, 20_000):
            w.write_table(t.slice(i, 20_000))
        time.sleep(1.5)  # the write of `n` streams; it is paused, not done
        c2 = fl.connect(f"grpc://127.0.0.1:{port}")
        d2 = fl.FlightDescriptor.for_command(json.dumps({"path": "n/c"}))
        w2, r2 = c2.do_put(d2, t.schema)
        w2.write_table(t.slice(0, 5))
        w2.done_writing()
        res = json.loads(r2.read().to_pybytes())
        w2.close()
        print("n/c committed:", res["version"], res["rows"], "rows")
        srv.send_signal(signal.SIGKILL)
        srv.wait()
        srv = None
        for x in (c, c2):
            try:
                x.close()
            except Exception:
                pass
        left = [f for f in tree(data) if f.startswith("n/v")]
        print("left by the killed put of n:", left)
        if not left:
            print("could not produce the leftover (the put left nothing); nothing to check")
            return 0
        # age everything the killed put left, so no threshold can excuse it
        old = time.time() - 3 * 3600
        for root, dirs, files in os.walk(os.path.join(data, "n")):
            for f in files + dirs:
                os.utime(os.path.join(root, f), (old, old), follow_symlinks=False)
        srv, c = start(data, port)
        v1 = action(c, "verify", {})[0]
        print("verify:", json.dumps({"ok": v1["ok"], "problems": v1["problems"]}))
        sw = action(c, "sweep", {"older_than_s": 0})[0]
        print("sweep older_than_s 0:", json.dumps(sw))
        c.close()
        srv.send_signal(signal.SIGTERM)
        srv.wait(30)
        srv = None
        off = subprocess.run([Q, "sweep", "--data-dir", data, "--older-than", "0s", "--json"], capture_output=True, text=True)
        print("offline sweep:", off.stdout.strip().replace("\n", " "))
        left2 = [f for f in tree(data) if f.startswith("n/v")]
        print("still there after sweeps:", left2)
        reported = any(p["path"].startswith("n/v") or p["path"] == "n" for p in v1["problems"])
        if left2 or not reported:
            print("BUG: the killed first put's version is %s by verify and %s by sweep" % (
                "reported" if reported else "NOT reported", "kept" if left2 else "removed"))
            return 1
        print("fixed: reported by verify and removed by sweep")
        return 0
    finally:
        if srv is not None:
            srv.kill()
            srv.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
