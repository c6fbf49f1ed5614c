"""r10 (red team round 11's r02): appending a dictionary<int8, timestamp> column to a partitioned version panics.

Bug: a version written with partition_by=["p"] and a data column of type
dictionary<int8, timestamp[us]> (with or without a time zone) accepts the
write, but every append of the same schema is refused INTERNAL
"internal error (see server log)"; the server log shows a recovered panic
in codec.gatherBatch (TakeRows) from arrow's NewRecordBatch:
  column "ts" type mismatch: got=dictionary<values=timestamp[us, tz=...],
  indices=int8, ordered=false>, want=<the same type>
Unpartitioned appends and other dictionary value types (string, int32,
date32, decimal, fixed-size binary) work, so this is the partitioned append
path's handling of dictionary-of-timestamp types (two equal types judged
different).

Severity: MEDIUM (a server panic on valid input; valid appends to a
partitioned profile are impossible, with an opaque INTERNAL error).

Expected: the append is acknowledged and DoGet returns all rows with the
declared type; (if refused, a clear InvalidArgument and no change on disk).
Exit 1 while the bug is present, 0 when fixed.
"""
import os, sys, json, subprocess, tempfile, shutil
import numpy as np, pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def tree(d):
    out = set()
    for root, dirs, files in os.walk(d):
        for x in dirs: out.add(os.path.join(root, x) + "/")
        for x in files: out.add(os.path.join(root, x))
    return out

def put(c, cmd, batches):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), batches[0].schema)
    for b in batches: w.write_batch(b)
    w.done_writing()
    msg = r.read()
    w.close()
    return json.loads(msg.to_pybytes())

d = tempfile.mkdtemp(prefix="r02_")
p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
bad = False
try:
    addr = p.stdout.readline().strip().rsplit(" ", 1)[-1]
    c = fl.connect("grpc://" + addr)
    for tz in [None, "Europe/Paris"]:
        path = f"t/ts{'_tz' if tz else ''}"
        vt = pa.timestamp("us", tz=tz)
        def batch(i):
            return pa.record_batch({
                "seq": pa.array(np.arange(10 * i, 10 * i + 10)),
                "p": pa.array(np.arange(10) % 2, pa.int32()),
                "ts": pa.DictionaryArray.from_arrays(pa.array(np.arange(10) % 2, pa.int8()),
                                                     pa.array([1000 + i, 2000], vt))})
        put(c, {"path": path, "mode": "write", "partition_by": ["p"]}, [batch(0)])
        before = tree(d)
        try:
            put(c, {"path": path, "mode": "append"}, [batch(1)])
        except Exception as e:
            print(f"{vt}: append refused: {str(e).splitlines()[0][:200]}")
            if tree(d) != before: print("  and the data dir changed")
            bad = True
            continue
        got = c.do_get(fl.Ticket(path.encode())).read_all().sort_by("seq")
        want = pa.Table.from_batches([batch(0), batch(1)])
        if got.num_rows != 20 or got.column("ts").type != want.column("ts").type or \
           got.column("ts").to_pylist() != want.column("ts").to_pylist():
            print(f"{vt}: read back differs"); bad = True
        else:
            print(f"{vt}: ok")
finally:
    p.terminate()
    try: p.wait(10)
    except Exception: p.kill()
    shutil.rmtree(d, ignore_errors=True)
sys.exit(1 if bad else 0)
