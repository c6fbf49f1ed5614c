#!/usr/bin/env python3
"""r03 (fixed; was CRITICAL): a put of a dictionary column whose index type is narrow (uint8 / int8)
sent as two batches, each valid on its own (200 / 100 dictionary values), but
together holding more distinct values than the index type can address
(a pandas categorical becomes dictionary<int8, string>).

The put is acknowledged; then
  * dictionary<uint8, string>: DoGet silently returns WRONG values (188 of 600
    rows read as other rows' strings), and `compact` writes those wrong values
    into a new version with fresh SHA-256s (verify says ok);
  * dictionary<int8, string>: every read fails with DATA_LOSS ("contains out of
    bounds index"), so the profile is unreadable, while verify says ok.
The same values put as a write and an append (each file valid alone) make
every DoGet of the version fail INTERNAL ("cannot combine dictionaries.
unified dictionary requires a larger index type" in the server log), and a
compaction then commits 188 wrong values.
pyarrow and polars also cannot read the stored files (the ARROW:schema says
uint8/int8 but a row group holds 400/200 distinct values). Expected: the
values read back exactly (e.g. widen the stored index type), or the put is
refused with InvalidArgument and nothing is written.

Exit 0 when correct, 1 while the bug is present."""
import json, os, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiver"))
d = tempfile.mkdtemp(prefix="r03_")
p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                     stderr=open(d + ".stderr", "wb"), env=dict(os.environ, QUIVER_POISON_FREED="1"))

def put(c, cmd, batches):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), batches[0].schema)
    for b in batches:
        w.write_batch(b)
    w.done_writing()
    res = json.loads(r.read().to_pybytes())
    w.close()
    return res

def get(c, path):
    return c.do_get(fl.Ticket(path.encode())).read_all()

bug = False
try:
    addr = p.stdout.readline().decode().split(" on ")[-1].strip()
    c = fl.connect("grpc://" + addr)
    for name, idx, nvals in [("u8", pa.uint8(), 200), ("i8", pa.int8(), 100)]:
        m = 300
        batches = [pa.record_batch({
            "id": pa.array(range(j * m, (j + 1) * m), pa.int64()),
            "d": pa.DictionaryArray.from_arrays(pa.array([i % nvals for i in range(m)], idx),
                                                pa.array([f"b{j}_{i}" for i in range(nvals)]))})
            for j in range(2)]
        expected = pa.Table.from_batches(batches).column("d").to_pylist()
        try:
            res = put(c, {"path": f"dc/{name}", "mode": "write"}, batches)
        except (fl.FlightError, pa.ArrowException) as e:
            print(f"{name}: put refused ({str(e).split('. gRPC')[0]}) - acceptable")
            continue
        print(f"{name}: put acknowledged, {res['rows']} rows")
        try:
            got = get(c, f"dc/{name}").column("d").to_pylist()
            wrong = [i for i in range(len(expected)) if got[i] != expected[i]]
            print(f"{name}: DoGet returned {len(wrong)} wrong values of {len(expected)}",
                  f"(row {wrong[0]}: got {got[wrong[0]]!r}, put {expected[wrong[0]]!r})" if wrong else "")
            bug |= bool(wrong)
        except (fl.FlightError, pa.ArrowException) as e:
            print(f"{name}: acknowledged put is unreadable: {str(e).split('. gRPC')[0]}")
            bug = True
    # the same data as two appends (each file valid alone), then compact
    m = 300
    batches = [pa.record_batch({
        "id": pa.array(range(j * m, (j + 1) * m), pa.int64()),
        "d": pa.DictionaryArray.from_arrays(pa.array([i % 200 for i in range(m)], pa.uint8()),
                                            pa.array([f"b{j}_{i}" for i in range(200)]))}) for j in range(2)]
    expected = pa.Table.from_batches(batches).column("d").to_pylist()
    put(c, {"path": "dc/app", "mode": "write"}, [batches[0]])
    put(c, {"path": "dc/app", "mode": "append"}, [batches[1]])
    print("app: write + append of dictionary<uint8,string>, 200 values each: acknowledged")
    try:
        got = get(c, "dc/app").column("d").to_pylist()
        print("app: DoGet correct:", got == expected)
        bug |= got != expected
    except (fl.FlightError, pa.ArrowException) as e:
        print("app: acknowledged appends are unreadable:", str(e).split(". gRPC")[0])
        bug = True
    try:
        res = json.loads(list(c.do_action(fl.Action("compact", b'{"path": "dc/app"}')))[0].body.to_pybytes())
        got = get(c, "dc/app").column("d").to_pylist()
        wrong = sum(a != b for a, b in zip(got, expected))
        print(f"app: compacted into {res['version']}; DoGet now returns {wrong} wrong values of {len(expected)}")
        bug |= wrong > 0
    except (fl.FlightError, pa.ArrowException) as e:
        print("app: compact/read after compact failed:", str(e).split(". gRPC")[0])
    # The files themselves: pyarrow and polars read each row group's
    # dictionary in the stored index type, so each must fit it.
    import glob, pyarrow.parquet as pq, polars as pl
    files = sorted(glob.glob(os.path.join(d, "dc", "**", "*.parquet"), recursive=True))
    assert files, "no data files found under the data dir"
    for f in files:
        try:
            pq.read_table(f).column("d").to_pylist()
            pl.read_parquet(f)
        except Exception as e:
            print(f"{os.path.relpath(f, d)}: pyarrow/polars cannot read it: {e}")
            bug = True
    v = json.loads(list(c.do_action(fl.Action("verify", b"{}")))[0].body.to_pybytes())
    print("verify ok:", v["ok"])
    print("BUG present" if bug else "OK")
    sys.exit(1 if bug else 0)
finally:
    p.terminate(); p.wait()
