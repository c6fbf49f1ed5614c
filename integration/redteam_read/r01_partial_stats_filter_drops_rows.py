#!/usr/bin/env python3
"""r01: a row filter silently drops rows of a row group whose Parquet statistics
carry min_value but no max_value. pyarrow (Arrow C++) writes exactly that when
the largest string of a row group is longer than its statistics size limit
(4096 bytes): min_value is kept, max_value is omitted. Quiver's row-group
pruning apparently treats the missing max as known (empty), so `s > 'x'` and
`s = 'a'` return no rows although pyarrow finds them. GetFlightInfo even
reports total_records 0 (which the docs say is exact).
Exit 1 while the bug is present."""
import json, os, shutil, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", "quiver")
PORT = int(os.environ.get("PORT", "19150"))
tmp = tempfile.mkdtemp(prefix="r01_")
data = os.path.join(tmp, "data")
prof = os.path.join(data, "p", "longstr")
os.makedirs(os.path.join(prof, "v0"))
vals = ["a", "z" * 5000, None, "m"]
fn = os.path.join(prof, "v0", "0.parquet")
pq.write_table(pa.table({"s": pa.array(vals, pa.string()), "i": pa.array([1, 2, 3, 4])}), fn)
with open(os.path.join(prof, "manifest.json"), "w") as f:
    json.dump({"latest_data_dir": "v0"}, f, indent=4)
st = pq.ParquetFile(fn).metadata.row_group(0).column(0).statistics
print("pyarrow statistics: has_min_max", st.has_min_max, "(min_value present, max_value absent)")

srv = subprocess.Popen([QUIVER, "serve", "--data-dir", data, "--addr", f"127.0.0.1:{PORT}"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
bad = 0
try:
    assert "serving" in srv.stdout.readline()
    c = fl.connect(f"grpc://127.0.0.1:{PORT}")
    ref = pq.read_table(fn)
    for op, v, fn_ in [(">", "x", pc.greater), ("=", "a", pc.equal), (">=", "m", pc.greater_equal)]:
        t = {"path": "p/longstr", "filter": {"col": "s", "op": op, "value": v}}
        got = c.do_get(fl.Ticket(json.dumps(t).encode())).read_all()["s"].to_pylist()
        exp = ref.filter(fn_(ref["s"], v))["s"].to_pylist()
        ok = got == exp
        bad += not ok
        print(f"s {op} {v!r}: quiver {len(got)} rows, pyarrow {len(exp)} rows", "OK" if ok else "MISMATCH")
    info = c.get_flight_info(fl.FlightDescriptor.for_command(json.dumps(
        {"path": "p/longstr", "filter": {"col": "s", "op": ">", "value": "x"}})))
    print("GetFlightInfo total_records:", info.total_records, "(expected 1 or -1)")
    if info.total_records not in (1, -1):
        bad += 1
    # the same table pushed through DoPut
    tbl = pa.table({"s": pa.array(vals, pa.string())})
    w, r = c.do_put(fl.FlightDescriptor.for_path("p/put"), tbl.schema)
    w.write_table(tbl); w.done_writing(); r.read(); w.close()
    got = c.do_get(fl.Ticket(json.dumps({"path": "p/put", "filter": {"col": "s", "op": ">", "value": "x"}}).encode())).read_all()
    print("DoPut copy, s > 'x':", got.num_rows, "rows (expected 1)")
    bad += got.num_rows != 1
finally:
    srv.terminate(); srv.wait(10)
    shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bad else "fixed")
sys.exit(1 if bad else 0)
