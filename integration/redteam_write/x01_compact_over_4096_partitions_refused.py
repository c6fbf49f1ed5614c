#!/usr/bin/env python3
"""x01: a partitioned version that legally holds more than 4096 partitions (a write of 4096,
then an append bringing one new partition value: every put stayed within "at most 4096
partitions per put") can never be compacted: the `compact` action (and `quiver compact
--data-dir`) is refused INVALID_ARGUMENT "a put may touch at most 4096 partitions" although
compaction is no put and format.md promises it rewrites the latest version (same
partitioning). Nothing can be done about it by the client (there is no flag).
Exit 1 while the bug is present, 0 when fixed (the compaction succeeds and the new version
reads back every row)."""
import os, sys, json, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")

def put(c, desc, table):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(desc).encode()), table.schema)
    w.write_table(table); w.done_writing(); b = r.read(); w.close()
    return json.loads(b.to_pybytes())

tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d"); port = free_port()
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--log-level", "error"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
bug = False
try:
    assert b"serving" in p.stdout.readline()
    c = fl.FlightClient(f"grpc://127.0.0.1:{port}")
    n = 4096
    put(c, {"path": "p/q", "mode": "write", "partition_by": ["k"]},
        pa.table({"id": list(range(n)), "k": ["k%05d" % i for i in range(n)]}))
    r = put(c, {"path": "p/q"}, pa.table({"id": [n], "k": ["k%05d" % n]}))
    print("write of 4096 partitions and append of 1 new partition acknowledged (seq %d)" % r["seq"])
    try:
        v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("compact", json.dumps({"path": "p/q"}).encode()))][0]["version"]
        t = c.do_get(fl.Ticket(json.dumps({"path": "p/q"}).encode())).read_all()
        print("compact OK ->", v, t.num_rows, "rows")
        if t.num_rows != n + 1: bug = True
    except Exception as e:
        print("compact (action) refused:", str(e).split(". gRPC")[0]); bug = True
    p.terminate(); p.wait(30)
    cli = subprocess.run([QUIVER, "compact", "p/q", "--data-dir", data], capture_output=True, text=True)
    print("quiver compact --data-dir: exit", cli.returncode, (cli.stdout + cli.stderr).strip()[:200])
    if cli.returncode != 0: bug = True
finally:
    if p.poll() is None: p.terminate(); p.wait(30)
    shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
