"""a02: a first put of `n/c` killed during its commit, below the profile `n`,
is `unknown` to verify forever and never swept.

What is wrong: profile `n` exists; the first put of `n/c` (which would fail
"nested profile" at its commit) was killed (`kill -9`) at its commit, holding
its manifest lock `n/c/manifest.json.write_lock`. Observed in a kill -9 loop of
concurrent first puts of `nestK` and `nestK/cJ` (the leftover was
`nest11/c6/{manifest.json.write_lock, v0/.version.json, v0/r=*/0.parquet}`, the
lock naming the killed server's pid). The script makes the same state
deterministically: a paused first put of `n/c`, a put creating `n`, `kill -9`,
and the lock file a killed commit leaves (same JSON, the dead server's pid).

After a restart `verify` reports `n/c` as `unknown` ("not a name the storage
layout defines; left alone"), `sweep {"older_than_s": 0}` skips it, and the
directory (with the killed put's version and data files) stays for good:
verify is never clean again without a hand edit. Without the lock file the very
same leftover is reported `orphan` ("a first write of a profile below this
one never committed (its writer was killed); sweep removes it once old") and
removed by sweep. The lock's owner is provably gone (same host and boot, no
such process), which operations.md says any writer or sweep takes over.

Promise contradicted: operations.md "Locks, crashes and recovery" ("A put
killed while it created its profile leaves a directory ... verify reports and
sweep removes what is in it by the same rules, and then the directory");
format.md "Sweep" (the lock of such a directory: "a dead writer's stale lock
is taken over ... and released"); reliability.md's kill tests expect only
sweepable kinds after a kill (`stale_temp`, `orphan`, `stale_lock`).
Severity: LOW-MEDIUM (a permanent non-clean verify and leaked files after a
crash; no committed data touched).

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


def main():
    data = tempfile.mkdtemp(prefix="rt26-a02-", dir="/tmp")
    port = free_port()
    srv = None
    try:
        srv, c = start(data, port)
        t = pa.table({"id": pa.array(range(10), pa.int64()), "r": pa.array([f"r{i % 3}" for i in range(10)])})
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "n/c", "mode": "write"})), t.schema)
        w.write_table(t.slice(0, 5))
        time.sleep(1)
        c2 = fl.connect(f"grpc://127.0.0.1:{port}")
        w2, r2 = c2.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "n"})), t.schema)
        w2.write_table(t)
        w2.done_writing()
        print("n committed:", json.loads(r2.read().to_pybytes())["version"])
        w2.close()
        pid = srv.pid
        start_ticks = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19])
        srv.send_signal(signal.SIGKILL)
        srv.wait()
        srv = None
        for x in (c, c2):
            try:
                x.close()
            except Exception:
                pass
        if not os.path.isdir(os.path.join(data, "n/c/v0")):
            print("could not produce the leftover version n/c/v0")
            return 0
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
        host = socket.gethostname()
        lock = {"host": host, "boot": boot, "pid": pid, "start": start_ticks,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime()), "writer": f"unknown@{host}:{pid}"}
        # what the killed commit of n/c left (as observed in a kill -9 loop)
        with open(os.path.join(data, "n/c/manifest.json.write_lock"), "w") as f:
            f.write(json.dumps(lock, separators=(",", ":")))
        srv, c = start(data, port)
        v1 = action(c, "verify", {})[0]
        print("verify:", json.dumps(v1["problems"]))
        sw = action(c, "sweep", {"older_than_s": 0})[0]
        print("sweep older_than_s 0:", json.dumps(sw))
        v2 = action(c, "verify", {})[0]
        print("verify after sweep:", v2["ok"], json.dumps(v2["problems"]))
        left = os.path.exists(os.path.join(data, "n/c"))
        print("n/c still on disk:", left)
        if left or not v2["ok"]:
            print("BUG: a killed nested first put's directory is never swept; verify stays unclean")
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
