#!/usr/bin/env python3
"""g01: one client's unencodable small append makes every other small append of
the same commit cycle fail with a permanent InvalidArgument.

Small appends are held in memory and encoded only by the commit cycle, into one
shared file. A timestamp[s] value that passes validation but cannot be stored as
Parquet (s -> ms overflows) is only detected then, and the whole group fails:
the innocent appends get INVALID_ARGUMENT "the data cannot be stored as Parquet:
column "t" ... would overflow", about data they never sent, a status clients do
not retry. Appends committed alone are unaffected (each gets its own verdict).

To put the appends in one cycle deterministically, the profile's manifest lock is
held for a moment the way another server (on another host) holds it during its
commit: a lock file naming that host. The waiting appends then commit together.

Exit 1 when a valid append is refused because of another client's data; 0 when
only the bad append fails."""
import os, sys, json, time, threading, tempfile, shutil, subprocess, datetime
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))
tmp = tempfile.mkdtemp(prefix="g01_")
data = os.path.join(tmp, "data")
srv = subprocess.Popen([QUIVER, "serve", "--data-dir", data, "--addr", "127.0.0.1:0", "--lock-timeout", "20s"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    loc = "grpc://" + srv.stdout.readline().strip().rsplit(" on ", 1)[1]

    def T(i, ts):
        return pa.table({"id": pa.array([i], pa.int64()), "t": pa.array([ts], pa.timestamp("s"))})

    def put(t, rid):
        c = fl.connect(loc)
        try:
            w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "a/p", "request_id": rid})), t.schema)
            w.write_table(t); w.done_writing()
            buf = r.read()
            w.close()  # raises the put's error
            return json.loads(buf.to_pybytes())
        finally:
            c.close()

    put(T(0, 0), "init")
    put(T(1, 0), "second")
    # another server's commit is in progress: its lock names another host
    lock = os.path.join(data, "a/p/manifest.json.write_lock")
    now = datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    with open(lock, "w") as f:
        json.dump({"host": "otherhost", "boot": "b", "pid": 4242, "start": 1, "time": now, "writer": "quiver@otherhost:4242"}, f)

    BAD = 2 ** 62  # seconds: valid Arrow, overflows when stored as Parquet milliseconds
    results = {}

    def run(k):
        try:
            results[k] = put(T(10 + k, BAD if k == 2 else k), f"g{k}")
        except Exception as e:
            results[k] = e

    ths = [threading.Thread(target=run, args=(k,)) for k in range(6)]
    for th in ths:
        th.start(); time.sleep(0.05)
    time.sleep(1.0)
    os.unlink(lock)  # the other server's commit ends
    for th in ths:
        th.join()
    for k in sorted(results):
        r = results[k]
        print(f"append g{k} ({'BAD' if k == 2 else 'valid'}):", r["files"][0]["path"] if isinstance(r, dict) else str(r)[:160])
    innocent = [k for k, r in results.items() if k != 2 and not isinstance(r, dict)]
    if not isinstance(results.get(2), Exception):
        print("note: the bad append was accepted")
    if innocent:
        print(f"BUG: {len(innocent)} valid appends ({['g%d' % k for k in innocent]}) were refused because of g2's data")
        sys.exit(1)
    print("OK: only the bad append failed")
    sys.exit(0)
finally:
    srv.terminate()
    try: srv.wait(10)
    except Exception: srv.kill(); srv.wait()
    shutil.rmtree(tmp, ignore_errors=True)
