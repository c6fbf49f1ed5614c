#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c10 (LOW): `quiver put` of a CSV file that starts with a UTF-8 byte order mark
(as Excel's "CSV UTF-8" and many Windows tools write) keeps the BOM in the
first column's name: the column is stored as "\ufeffid", prints as "id", and
`--columns id`, `--where "id = 1"` and `--partition-by id` then fail with
"no column". pyarrow, polars and DuckDB strip the BOM. Expected: the BOM is
stripped (or the put refused naming it).
"""
s = Server()
rc = 1
try:
    p = s.tmp + "/excel.csv"
    open(p, "wb").write("\ufeffid,name\r\n1,a\r\n2,b\r\n".encode("utf-8"))
    r = s.put("bom/p", p); print("put exit", r.returncode, r.stderr.decode().strip())
    names = s.doget("bom/p").column_names
    print("stored column names:", [n.encode() for n in names])
    r2 = s.cli("get", "bom/p", "--columns", "id")
    print("quiver get --columns id:", r2.returncode, r2.stderr.decode().strip())
    if names[0] != "id":
        print("expected: first column named 'id'")
        print("BUG: BOM kept in the column name")
    else:
        print("OK"); rc = 0
finally:
    s.cleanup()
sys.exit(rc)
