#!/usr/bin/env python3
"""verify (online) reports live, in-progress/just-committed appends of the
same server as `orphan` ("its writer died before committing"), although
docs/format.md says: in a profile the verifying server is writing to, only once
older than the stale threshold (1h)."""
import os, sys, json, re, subprocess, tempfile, threading, time, shutil
import pyarrow as pa, pyarrow.flight as fl
QBIN = os.environ.get("QUIVER") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "quiver")
data = tempfile.mkdtemp(prefix="r01_")
srv = subprocess.Popen([QBIN, "serve", "--data-dir", data, "--addr", "127.0.0.1:0"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                       env=dict(os.environ, QUIVER_POISON_FREED="1"))
try:
    addr = re.search(r"on (\S+)$", srv.stdout.readline().strip()).group(1)
    def put(c, t, **cmd):
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(dict(path="m/a", **cmd))), t.schema)
        w.write_table(t); w.done_writing(); r.read(); w.close()
    def action(c, typ, **body):
        return [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action(typ, json.dumps(body).encode()))]
    c = fl.connect("grpc://" + addr)
    t = pa.table({"id": [1, 2, 3], "s": ["a", "b" * 7000, None]})
    put(c, t, mode="write")
    stop = time.time() + 60; bad = []
    def appender():
        cc = fl.connect("grpc://" + addr)
        i = 0
        while time.time() < stop and not bad:
            put(cc, t, metadata={"w": "z" * 5000 + str(i)}); i += 1
    def verifier():
        cc = fl.connect("grpc://" + addr)
        while time.time() < stop and not bad:
            action(cc, "lineage", path="m/a"); action(cc, "list-versions", path="m/a")
            v = action(cc, "verify", path="m/a")[0]
            if not v["ok"]: bad.append(v)
    ths = [threading.Thread(target=appender) for _ in range(2)] + [threading.Thread(target=verifier) for _ in range(2)]
    [x.start() for x in ths]; [x.join() for x in ths]
    final = action(c, "verify", path="m/a")[0]
    if bad:
        print("verify during appends:", json.dumps(bad[0]["problems"])[:600])
        print("verify after appends finished: ok =", final["ok"])
        print("FAIL"); sys.exit(1)
    print("PASS")
finally:
    srv.terminate(); srv.wait(10); shutil.rmtree(data, ignore_errors=True)
