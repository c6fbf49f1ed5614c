"""z01: a killed FIRST put of a profile leaves data on disk that verify never reports and sweep never removes.

What is wrong: kill -9 the server while a partitioned write that creates a new profile is
streaming (here: 500,000 rows into 4 partitions; the spill has already encoded row groups
into hidden partition temp files `v0/p=N/.<hex>.0.parquet.tmp`) and restart it.  The profile
directory then holds the reserved version `v0/.version.json` and the put's encoded rows.
`verify` (server action and offline `quiver verify --data-dir`) answers ok with no problem
(no stale_temp / orphan), and `sweep {"older_than_s": 0}` (server action and offline
`quiver sweep --data-dir --older-than 0s`) removes nothing: the leftovers stay forever
unless someone happens to write that same profile again.  (A killed write of a new version
of an EXISTING profile is removed by the same sweep.)  If the kill happens during the
commit, the directory also keeps `manifest.json.write_lock` and `.log/*.tmp` temps, all
unreported.

Promise contradicted: operations.md "What killed puts left behind (data files no record lists,
version directories never committed, temps) is invisible to readers and removed by `sweep`
once older than its threshold"; format.md "Sweep ... removes hidden temps; ... version
directories never committed"; verify's `stale_temp` / `orphan` kinds.
Severity: LOW-MEDIUM (unbounded, invisible disk leak of up to a whole put's data per
killed first write; no data loss).

Exit 1 while the bug is present, 0 when fixed.
"""
import json, os, pathlib, shutil, signal, socket, subprocess, sys, tempfile, time
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", str(pathlib.Path(__file__).resolve().parents[2] / "bin" / "quiver"))


def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")


def start(data, port):
    p = subprocess.Popen(["nice", "-n", "15", Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline()
    if b"serving" not in line:
        p.kill(); raise SystemExit(f"server did not start: {line!r}")
    return p, fl.connect(f"grpc://127.0.0.1:{port}")


def listing(d):
    out = []
    for root, _, fs in os.walk(d):
        out += [os.path.relpath(os.path.join(root, f), d) for f in fs]
    return sorted(out)


def main():
    data = tempfile.mkdtemp(prefix="rt25-z01-", dir="/tmp")
    port = free_port()
    srv = None
    try:
        srv, c = start(data, port)
        n = 100_000
        ids = pa.array(range(n), pa.int64())
        batch = pa.record_batch({"id": ids, "p": pa.array([str(i % 4) for i in range(n)])})
        cmd = {"path": "fresh/profile", "mode": "write", "partition_by": ["p"]}
        w, _ = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), batch.schema)
        for _ in range(5):
            w.write_batch(batch)
        # wait until the put has something on disk
        prof = os.path.join(data, "fresh", "profile")
        for _ in range(100):
            if any(f.endswith(".tmp") for f in listing(prof)) if os.path.isdir(prof) else False:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        srv.send_signal(signal.SIGKILL); srv.wait()
        left = listing(prof)
        print("left by the killed first put:", left)
        if not left:
            print("nothing was left on disk (could not set up the case)"); return 0
        srv, c = start(data, port)
        ver = [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action("verify", b"{}"))][0]
        sw = [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action("sweep", b'{"older_than_s": 0}'))][0]
        print("verify:", json.dumps(ver)[:300])
        print("sweep older_than_s=0:", json.dumps(sw)[:300])
        srv.terminate(); srv.wait(); srv = None
        off = subprocess.run([Q, "sweep", "--data-dir", data, "--older-than", "0s"], capture_output=True, text=True)
        print("offline sweep:", (off.stdout + off.stderr).strip()[:300])
        after = listing(prof)
        print("after both sweeps:", after)
        reported = bool(ver.get("problems"))
        if after and not reported:
            print("BUG: the killed put's leftovers are neither reported by verify nor removed by sweep")
            return 1
        if after:
            print("BUG: leftovers reported but never removed by sweep"); return 1
        print("OK: leftovers removed")
        return 0
    finally:
        if srv is not None and srv.poll() is None:
            srv.kill(); srv.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
