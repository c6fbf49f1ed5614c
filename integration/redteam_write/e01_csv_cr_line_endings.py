#!/usr/bin/env python3
"""e01 (CRITICAL): `quiver put` of a CSV with classic-Mac CR-only line endings
is acknowledged (exit 0) with 0 rows: the whole file becomes the header, every
value turns into a column name ("amount\\r1", "10\\r2", ...).

pyarrow (and polars, DuckDB) read CR as a line end: 3 rows, columns id/name/amount.
Expected: the 3 rows stored (or the put refused); never a 0-row commit with the
data in the schema.
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *
import pyarrow.csv as pc

s = Server()
try:
    content = "id,name,amount\r1,alice,10\r2,bob,20\r3,carol,30\r"
    p = s.write("cr.csv", content)
    ref = pc.read_csv(p)
    r = s.put("t/cr", p)
    print("put:", r.returncode, out(r).splitlines()[0] if out(r) else "")
    if r.returncode != 0:
        verdict(True, f"{ref.num_rows} rows {ref.column_names} or a refusal", "refused: " + out(r))
    got = s.doget("t/cr")
    ok = got.num_rows == ref.num_rows and got.column_names == ref.column_names
    verdict(ok, f"{ref.num_rows} rows, columns {ref.column_names} (pyarrow)",
            f"exit 0, {got.num_rows} rows, columns {got.column_names}")
finally:
    s.cleanup()
