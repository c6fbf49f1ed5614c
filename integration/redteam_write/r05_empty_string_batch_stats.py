#!/usr/bin/env python3
"""r01: a batch whose string column holds only "" (and nulls), written into the
same Parquet row group after a batch with non-empty strings, is left out of the
column chunk's min/max statistics (min stays 'a'). Row-group pruning then drops
the rows: Quiver's filtered DoGet of b = '' returns 0 rows (expected 2), and so
do DuckDB and polars reading the file directly.

Exit 0 when correct, 1 while the bug is present."""
import json, os, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiver"))
d = tempfile.mkdtemp(prefix="r01_")
err = open(d + ".stderr", "wb")
p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                     stderr=err, env=dict(os.environ, QUIVER_POISON_FREED="1"))
try:
    addr = p.stdout.readline().decode().split(" on ")[-1].strip()
    c = fl.connect("grpc://" + addr)
    b1 = pa.record_batch({"id": pa.array([0, 1, 2], pa.int64()), "b": ["a", "b", "c"]})
    b2 = pa.record_batch({"id": pa.array([3, 4, 5], pa.int64()), "b": ["", None, ""]})
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "e/x", "mode": "write"})), b1.schema)
    w.write_batch(b1); w.write_batch(b2); w.done_writing()
    res = json.loads(r.read().to_pybytes()); w.close()
    f = os.path.join(d, "e/x", res["files"][0]["path"])
    st = pq.ParquetFile(f).metadata.row_group(0).column(1).statistics
    print(f"file stats of b: min={st.min!r} max={st.max!r}; rows with b='' in file: "
          f"{pq.read_table(f).column('b').to_pylist().count('')}")
    t = {"path": "e/x", "filter": {"col": "b", "op": "=", "value": ""}}
    got = c.do_get(fl.Ticket(json.dumps(t).encode())).read_all()
    print(f"DoGet filter b = '': {got.num_rows} rows (expected 2)")
    try:
        import duckdb
        print("duckdb direct:", duckdb.sql(f"select count(*) from read_parquet('{f}') where b = ''").fetchall()[0][0], "(expected 2)")
    except ImportError:
        pass
    bad = got.num_rows != 2 or (st.has_min_max and st.min != "")
    print("BUG present" if bad else "OK")
    sys.exit(1 if bad else 0)
finally:
    p.terminate(); p.wait()
