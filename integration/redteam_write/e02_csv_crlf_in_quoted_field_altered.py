#!/usr/bin/env python3
"""e02 (CRITICAL): `quiver put` of CSV silently turns "\\r\\n" inside a quoted
field into "\\n"; so `quiver get --format csv` -> `quiver put` does not
round-trip such strings.

A string column holding "line1\\r\\nline2" (e.g. text typed on Windows) is
written by `quiver get --format csv` correctly quoted with its CR; putting that
CSV back stores "line1\\nline2". pyarrow's CSV reader keeps "\\r\\n". The put is
acknowledged with no word of the change.
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *
import pyarrow.csv as pc

s = Server()
try:
    t = pa.table({"id": [1, 2], "note": ["line1\r\nline2", "a\rb"]})
    pq.write_table(t, s.path("src.parquet"))
    assert s.put("t/src", s.path("src.parquet")).returncode == 0
    r = s.get("t/src", "--format", "csv", "-o", s.path("out.csv"))
    assert r.returncode == 0, out(r)
    raw = open(s.path("out.csv"), "rb").read()
    print("quiver get csv bytes:", raw)
    print("pyarrow reads that CSV as:", pc.read_csv(s.path("out.csv")).column("note").to_pylist())
    r = s.put("t/back", s.path("out.csv"))
    assert r.returncode == 0, out(r)
    back = s.doget("t/back").column("note").to_pylist()
    verdict(back == t.column("note").to_pylist(), repr(t.column("note").to_pylist()), repr(back) + " (put exit 0)")
finally:
    s.cleanup()
