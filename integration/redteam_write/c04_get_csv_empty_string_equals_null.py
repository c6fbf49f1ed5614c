#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c04 (MEDIUM): `quiver get --format csv` writes the empty string and null the
same way (an empty field), so "" values silently become nulls (or the reverse)
for whoever reads the CSV; also for dictionary and binary columns.

pyarrow's CSV writer keeps them apart ("" is written as `""`, null as an empty
field) and pyarrow/polars read them back apart; Quiver's own CSV writer loses
the difference, and `quiver put` of that CSV stores nulls where the profile had
"". Expected: "" written as `""` (or the export refused, as the server refuses
values a CSV profile cannot hold).
"""
import io, pyarrow.csv as pcsv
s = Server()
rc = 1
try:
    t = pa.table({"s": pa.array(["", None, "x"]), "d": pa.array(["", None, "x"]).dictionary_encode(),
                  "b": pa.array([b"", None, b"x"])})
    pq.write_table(t, s.tmp + "/a.parquet")
    assert s.put("csv/p", s.tmp + "/a.parquet").returncode == 0
    got = s.doget("csv/p")
    r = s.cli("get", "csv/p", "--format", "csv", "-o", "-")
    print("quiver get --format csv wrote:", r.stdout)
    buf = io.BytesIO(); pcsv.write_csv(t, buf); print("pyarrow write_csv writes:    ", buf.getvalue())
    back = pcsv.read_csv(io.BytesIO(r.stdout), convert_options=pcsv.ConvertOptions(column_types={"s": pa.string(), "d": pa.string(), "b": pa.string()}))
    print("DoGet s:", got.column("s").to_pylist(), "  CSV read back s:", back.column("s").to_pylist())
    lines = r.stdout.decode().splitlines()
    if lines[1] == lines[2].replace("", "") and lines[1] == ",,":
        print("expected: row 1 (\"\") and row 2 (null) distinguishable in the CSV")
        print("BUG: rows 1 and 2 are both written as ',,'")
    else:
        print("OK"); rc = 0
finally:
    s.cleanup()
sys.exit(rc)
