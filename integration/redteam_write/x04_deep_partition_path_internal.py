#!/usr/bin/env python3
"""x04: a partitioned write whose hive path is longer than the kernel's PATH_MAX (30 partition
columns, each value 150 characters: every single value is within the per-directory limit the
server checks) is answered INTERNAL "internal error (see server log)" -- the cause, logged only,
is ENAMETOOLONG ("file name too long") on the data file. The client cannot tell it sent an
impossible layout; the status should be INVALID_ARGUMENT naming the limit, as for a partition
value "too long for a directory name". Also checks that nothing is left on disk.
Exit 1 while the bug is present, 0 when fixed."""
import os, sys, json, socket, subprocess, tempfile, shutil, time
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

def tree(d):
    return {os.path.relpath(os.path.join(r, x), d) for r, ds, fs in os.walk(d) for x in ds + fs}

tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d"); port = free_port()
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--log-level", "error"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
bug = False
try:
    assert b"serving" in p.stdout.readline()
    c = fl.FlightClient(f"grpc://127.0.0.1:{port}")
    put(c, {"path": "p/q", "mode": "write"}, pa.table({"a": [0]}))
    names = ["k%02d" % j for j in range(30)]
    t = pa.table({"a": [1], **{n: ["v" * 150] for n in names}})
    before = tree(data)
    try:
        r = put(c, {"path": "p/q", "mode": "write", "partition_by": names}, t)
        print("acknowledged:", r["version"], "path of", len(r["files"][0]["path"]), "bytes")
    except fl.FlightInternalError as e:
        print("refused INTERNAL:", str(e).split(". gRPC")[0]); bug = True
    except Exception as e:
        print("refused:", type(e).__name__, str(e).split(". gRPC")[0][:200])
    time.sleep(1)
    left = sorted(tree(data) - before)
    if left: print("left on disk:", len(left), "entries"); bug = True
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
