#!/usr/bin/env python3
"""e06 (MEDIUM): `quiver get --format csv` writes the empty list [] and the
one-element list [null] alike, as {} -- for list<string> and list<int64>.

[null, null] is "{,}" and ["", null] is {"",}, so null elements are written
as empty items, but a single null element leaves nothing between the braces.
Whoever reads the CSV cannot tell [] from [null] (the c04 problem, one level
down). Expected: distinct text for [] and [null].
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *
import csv, io

s = Server()
try:
    t = pa.table({"id": [1, 2, 3, 4],
                  "ls": pa.array([[], [None], [None, None], None], pa.list_(pa.string())),
                  "li": pa.array([[], [None], [None, None], None], pa.list_(pa.int64()))})
    pq.write_table(t, s.path("in.parquet"))
    assert s.put("t/l", s.path("in.parquet")).returncode == 0
    r = s.get("t/l", "--format", "csv", "-o", "-")
    text = r.stdout.decode()
    print(text)
    rows = list(csv.reader(io.StringIO(text)))[1:]
    ok = rows[0][1] != rows[1][1] and rows[0][2] != rows[1][2]
    # (added with the fix) the CSV appends back to its profile as the same lists
    with open(s.path("out.csv"), "wb") as f:
        f.write(r.stdout)
    p = s.put("t/l", s.path("out.csv"))
    back = s.doget("t/l")
    same = p.returncode == 0 and back.slice(4).to_pylist() == back.slice(0, 4).to_pylist() == t.to_pylist()
    print("put back:", p.returncode, out(p)[:200], same)
    verdict(ok and same, "row 1 ([]) and row 2 ([null]) written differently, and the CSV puts back as the same lists",
            f"[] -> {rows[0][1]!r}, [null] -> {rows[1][1]!r} (list<string>); {rows[0][2]!r} vs {rows[1][2]!r} (list<int64>); put back the same: {same}")
finally:
    s.cleanup()
