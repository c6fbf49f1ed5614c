#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c09 (LOW): a CSV/NDJSON value that does not fit the type inferred from the
first 1000 rows is refused with a bare Go parser message that names neither
the line, nor the column, nor why (the inference window).

e.g. `quiver: /x/late.csv: strconv.ParseInt: parsing "1.5": invalid syntax`
and `quiver: /x/late.ndjson: json: cannot unmarshal late into Go value of type
int64`. The same mix within the first 1000 rows gets a good message
("NDJSON line 2: column "a" holds both ..."). Expected: file, line, column,
the inferred type, and the hint (--format parquet/arrow, or put the rows
first). Nothing is written (checked).
"""
s = Server()
rc = 0
try:
    cases = [("late.csv", "a,b\n" + "1,x\n" * 1000 + "1.5,y\n"),
             ("late2.csv", "a,b\n" + "1,x\n" * 1000 + "9223372036854775808,y\n"),
             ("late.ndjson", '{"a": 1, "b": "x"}\n' * 1000 + '{"a": "late", "b": "y"}\n'),
             ("late2.ndjson", '{"a": 1.5}\n' * 1000 + '{"a": 1e400}\n'),
             ("dupkey.ndjson", '{"a": 1, "a": 2}\n')]
    for name, text in cases:
        p = s.tmp + "/" + name; open(p, "w").write(text)
        before = s.snapshot()
        r = s.put("e/" + name.replace(".", "_"), p)
        msg = r.stderr.decode().strip().replace(s.tmp, "$TMP")
        names_line = "line" in msg
        names_col = '"a"' in msg or "column a" in msg
        print(f"{name}: exit {r.returncode}: {msg}")
        if s.snapshot() != before: print("   and the data dir changed!"); rc = 1
        if r.returncode == 0 or not (names_line and names_col): rc = 1
    print("expected: each message names the line and the column (and the inferred type)")
    print("BUG: messages name neither line nor column" if rc else "OK")
finally:
    s.cleanup()
sys.exit(rc)
