#!/usr/bin/env python3
"""r08 (red team round 9's r02, LOW): a partitioned put refused with
InvalidArgument (here: a later batch has an empty-string partition value),
or cancelled by its client, left what it created on disk: a refused write
left its whole version directory (v1/ with one empty k=... directory per
partition), a refused append left empty partition directories inside the
committed version. format.md: "A write that fails before its commit removes
its whole version directory" and "a refused put leaves the data directory as
it found it".

Tried with partitions whose rows are small (held until the end of the put)
and large (each written to its file at once), refused and cancelled (the
client killed mid-put). Exit 0 when correct, 1 while the bug is present."""
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
    bad = pa.record_batch({"id": ids(900, 2), "k": ["n1", ""], "s": ["x", "y"]})
    failed = False
    small = pa.record_batch({"id": ids(100, 300), "k": [f"n{i % 100}" for i in range(300)], "s": [str(i) for i in range(300)]})
    large = pa.record_batch({"id": ids(100, 300), "k": [f"n{i % 10}" for i in range(300)], "s": [str(i) * 4000 for i in range(300)]})
    for name, good in [("small partitions", small), ("large partitions", large)]:
        for cmd in [{"path": "a/p", "mode": "write", "partition_by": ["k"]}, {"path": "a/p", "mode": "append"}]:
            before = snapshot()
            try:
                put(c, cmd, [good, bad])
                print(name, cmd["mode"], "unexpectedly accepted")
            except (fl.FlightError, pa.ArrowException) as e:
                print(name, cmd["mode"], "refused:", str(e).split(". gRPC")[0])
            time.sleep(1)
            new = sorted(snapshot() - before)
            print(f"  {len(new)} new entries left on disk, e.g. {new[:4]}")
            failed |= bool(new)
            # Cancelled: a client that sends a batch and is killed.
            before = snapshot()
            code = ("import json, sys, os, time, pyarrow as pa, pyarrow.flight as fl\n"
                    "c = fl.connect(sys.argv[1]); b = pa.ipc.read_record_batch(pa.py_buffer(sys.stdin.buffer.read()), pa.schema([('id', pa.int64()), ('k', pa.string()), ('s', pa.string())]))\n"
                    "w, r = c.do_put(fl.FlightDescriptor.for_command(sys.argv[2]), b.schema)\n"
                    "w.write_batch(b); print('sent', flush=True); time.sleep(60)\n")
            k = subprocess.Popen([sys.executable, "-c", code, "grpc://" + addr, json.dumps(cmd)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            k.stdin.write(good.serialize().to_pybytes()); k.stdin.close()
            k.stdout.readline(); time.sleep(1); k.kill(); k.wait()
            time.sleep(2)
            new = sorted(snapshot() - before)
            print(f"  {name} {cmd['mode']} cancelled: {len(new)} new entries left on disk, e.g. {new[:4]}")
            failed |= bool(new)
    print("BUG present" if failed else "OK")
    sys.exit(1 if failed else 0)
finally:
    p.terminate(); p.wait()
