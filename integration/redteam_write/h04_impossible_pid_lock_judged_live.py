#!/usr/bin/env python3
"""h04 (LOW): a manifest lock of this host and this boot naming a pid >= 2^32 (no such
process can exist: pid_max <= 4194304) is judged "held by live process" and blocks every
writer of the profile until --lock-stale-after, instead of being "provably gone" (format.md:
"An owner is provably gone when the lock names this host and this boot and its pid is not a
live process"). Pids 2^31-1 or 4194305 are correctly judged gone, so this looks like a pid
truncation to 32 bits in the liveness check (2^32 -> 0, 2^32+1 -> 1 = init...).
Exit 0 = bug absent (lock taken over at once), 1 = bug present."""
import os, re, sys, json, time, socket, datetime, tempfile, subprocess
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def put(c, path, t):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path})), t.schema)
    w.write_table(t); w.done_writing(); res = r.read(); w.close()
    return json.loads(res.to_pybytes())

def main():
    d = tempfile.mkdtemp(prefix="h04")
    err = tempfile.NamedTemporaryFile("w+", delete=False, dir="/tmp", prefix="h04err")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0",
                          "--lock-stale-after", "1000h", "--lock-timeout", "2s"], stdout=subprocess.PIPE, stderr=err, text=True)
    c = fl.connect("grpc://" + re.search(r"on (\S+)$", p.stdout.readline().strip()).group(1))
    t = pa.table({"a": [1]})
    put(c, "p", t)
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    host = socket.gethostname()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lp = os.path.join(d, "p", "manifest.json.write_lock")
    stuck = []
    for pid in [2**32 + 1, 2**63 - 1, 2**31 - 1]:
        with open(lp, "w") as f:
            f.write(json.dumps({"host": host, "boot": boot, "pid": pid, "start": 12345, "time": now,
                                "writer": "quiver@%s:%d" % (host, pid)}))
        t0 = time.time()
        try:
            put(c, "p", t); res = "taken over (ok)"
        except Exception as e:
            res = str(e).split(". gRPC")[0][:160]; stuck.append(pid)
        print("pid %d: %.1fs %s" % (pid, time.time() - t0, res))
        if os.path.exists(lp): os.remove(lp)
    p.terminate(); p.wait()
    if "panic" in open(err.name).read():
        print("PANIC"); return 1
    if stuck:
        print("BUG: locks naming impossible pids %s were judged live" % stuck); return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
