#!/usr/bin/env python3
"""g02: empty (0-row) small appends committed in one cycle share one data file,
but their commit records list it as an ordinary entry: no "file_rows" (0 is
omitted) and no "offset". format.md says file_rows is set on every shared
file, so a lineage consumer or auditor sees two appends each claiming the same
file as wholly its own. verify does not mind.

The appends are gathered into one cycle by holding the profile's manifest lock
for a moment the way another server (on another host) holds it during its commit.
Exit 1 when a file listed by several records lacks file_rows; 0 otherwise."""
import os, sys, json, time, threading, tempfile, shutil, subprocess, datetime, collections
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))
tmp = tempfile.mkdtemp(prefix="g02_")
data = os.path.join(tmp, "data")
srv = subprocess.Popen([QUIVER, "serve", "--data-dir", data, "--addr", "127.0.0.1:0", "--lock-timeout", "20s"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    loc = "grpc://" + srv.stdout.readline().strip().rsplit(" on ", 1)[1]

    def put(t, rid):
        c = fl.connect(loc)
        try:
            w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "a/p", "request_id": rid})), t.schema)
            w.write_table(t); w.done_writing()
            buf = r.read(); w.close()
            return json.loads(buf.to_pybytes())
        finally:
            c.close()

    E = pa.table({"id": pa.array([], pa.int64()), "w": pa.array([], pa.string())})
    put(pa.table({"id": pa.array([1], pa.int64()), "w": ["a"]}), "init")
    put(E, "lead")
    lock = os.path.join(data, "a/p/manifest.json.write_lock")
    now = datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    with open(lock, "w") as f:
        json.dump({"host": "otherhost", "boot": "b", "pid": 4242, "start": 1, "time": now, "writer": "quiver@otherhost:4242"}, f)
    res = {}
    def run(k):
        try: res[k] = put(E, f"e{k}")
        except Exception as e: res[k] = e
    ths = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for th in ths:
        th.start(); time.sleep(0.05)
    time.sleep(1.0)
    os.unlink(lock)
    for th in ths: th.join()
    c = fl.connect(loc)
    lin = [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action("lineage", json.dumps({"path": "a/p"}).encode()))]
    c.close()
    by = collections.defaultdict(list)
    for l in lin:
        for f in l["files"]:
            by[f["path"]].append((l.get("request_id"), f))
    bad = {p: e for p, e in by.items() if len(e) > 1 and any("file_rows" not in f for _, f in e)}
    for p, e in by.items():
        if len(e) > 1:
            print(p, "listed by", [rid for rid, _ in e], "entries:", [{k: v for k, v in f.items() if k != "sha256"} for _, f in e])
    if bad:
        print("BUG: a file shared by several records is listed without file_rows/offset:", sorted(bad))
        sys.exit(1)
    print("OK: every file listed by several records carries file_rows")
    sys.exit(0)
finally:
    srv.terminate()
    try: srv.wait(10)
    except Exception: srv.kill(); srv.wait()
    shutil.rmtree(tmp, ignore_errors=True)
