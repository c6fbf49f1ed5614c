#!/usr/bin/env python3
"""r02: a partitioned put refused with InvalidArgument (here: a later batch has an
empty-string partition value) leaves what it created on disk: a refused write
leaves its whole version directory (v1/ with one empty k=... directory per
partition), a refused append leaves empty partition directories inside the
committed version. format.md: "A write that fails before its commit removes its
whole version directory" and "a refused put leaves the data directory as it
found it". An unpartitioned refused put does leave nothing.

Exit 0 when correct, 1 while the bug is present."""
import json, os, subprocess, sys, tempfile, time
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiver"))
d = tempfile.mkdtemp(prefix="r02_")
p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                     stderr=open(d + ".stderr", "wb"), env=dict(os.environ, QUIVER_POISON_FREED="1"))

def snapshot():
    out = set()
    for root, dirs, files in os.walk(d):
        for x in files + dirs:
            out.add(os.path.relpath(os.path.join(root, x), d))
    return out

def put(c, cmd, batches):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), batches[0].schema)
    for b in batches:
        w.write_batch(b)
    w.done_writing()
    try:
        r.read()
    finally:
        w.close()

try:
    addr = p.stdout.readline().decode().split(" on ")[-1].strip()
    c = fl.connect("grpc://" + addr)
    ids = lambda a, n: pa.array(range(a, a + n), pa.int64())
    base = pa.record_batch({"id": ids(0, 10), "k": [f"k{i % 2}" for i in range(10)], "s": [str(i) for i in range(10)]})
    put(c, {"path": "a/p", "mode": "write", "partition_by": ["k"]}, [base])
    good = pa.record_batch({"id": ids(100, 300), "k": [f"n{i % 100}" for i in range(300)], "s": [str(i) for i in range(300)]})
    bad = pa.record_batch({"id": ids(900, 2), "k": ["n1", ""], "s": ["x", "y"]})
    failed = False
    for cmd in [{"path": "a/p", "mode": "write", "partition_by": ["k"]}, {"path": "a/p", "mode": "append"}]:
        before = snapshot()
        try:
            put(c, cmd, [good, bad])
            print(cmd["mode"], "unexpectedly accepted")
        except (fl.FlightError, pa.ArrowException) as e:
            print(cmd["mode"], "refused:", str(e).split(". gRPC")[0])
        time.sleep(2)
        new = sorted(snapshot() - before)
        print(f"  {len(new)} new entries left on disk, e.g. {new[:4]}")
        failed |= bool(new)
    print("BUG present" if failed else "OK")
    sys.exit(1 if failed else 0)
finally:
    p.terminate(); p.wait()
