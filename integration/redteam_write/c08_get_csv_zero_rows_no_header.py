#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c08 (LOW): `quiver get --format csv` of a result with no rows writes an empty
file (0 bytes), without the header row.

`--limit 0`, a `--where` that matches nothing, or an empty profile give a 0-byte
CSV: the column names are lost, and pyarrow ("Empty CSV file"), polars and
DuckDB cannot read it as the table it is. Expected: the header line alone
(pyarrow's write_csv writes `"a","s"` for an empty table).
"""
import pyarrow.csv as pcsv
s = Server()
rc = 1
try:
    pq.write_table(pa.table({"a": [1, 2], "s": ["x", "y"]}), s.tmp + "/a.parquet")
    assert s.put("z/p", s.tmp + "/a.parquet").returncode == 0
    outs = []
    for args in (["--limit", "0"], ["--where", "a > 100"]):
        r = s.cli("get", "z/p", "--format", "csv", "-o", s.tmp + "/o.csv", *args)
        body = open(s.tmp + "/o.csv", "rb").read()
        print(args, "exit", r.returncode, "->", body)
        outs.append(body)
    if all(b == b"" for b in outs):
        try: pcsv.read_csv(s.tmp + "/o.csv")
        except Exception as e: print("pyarrow:", e)
        print("expected: a header line 'a,s'")
        print("BUG: zero-row CSV has no header")
    else:
        print("OK"); rc = 0
finally:
    s.cleanup()
sys.exit(rc)
