#!/usr/bin/env python3
"""f01 (HIGH): `quiver get --format csv` -> `quiver put` does not round-trip
the empty string, nor a null row of a one-column table.

get writes the empty string as "" and null as an empty field (c04), but put
read a quoted "" as null: every empty string became null. And a null row of
a one-column table is a blank line in get's CSV (as pyarrow and polars write
it; polars and DuckDB read it back as null), which put skipped: the row was
lost. Both puts were acknowledged with exit 0. Checked for a new profile
(inferred types) and for an append to the profile the CSV came from (its
types).
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *

s = Server()
try:
    tables = {
        "multi": pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()),
                           "s": pa.array(["", None, 'a"b', "x\r\ny"], pa.string()),
                           "l": pa.array([None, "", "", "1"], pa.large_string())}),
        "one": pa.table({"s": pa.array([None, "a", None, "", None], pa.string())}),
        "onenum": pa.table({"n": pa.array([1, None, 2, None], pa.int64())}),
    }
    problems = []
    for name, t in tables.items():
        pq.write_table(t, s.path(name + ".parquet"))
        r = s.put("t/" + name, s.path(name + ".parquet"))
        assert r.returncode == 0, out(r)
        r = s.get("t/" + name, "--format", "csv", "-o", s.path(name + ".csv"))
        assert r.returncode == 0, out(r)
        print(name, "CSV:", open(s.path(name + ".csv"), "rb").read())
        want = t.to_pydict()
        # a new profile, types inferred
        r = s.put("t/" + name + "_new", s.path(name + ".csv"))
        if r.returncode != 0:
            problems.append(f"{name}: put to a new profile failed: {out(r)}")
        else:
            got = s.doget("t/" + name + "_new").to_pydict()
            got_vals = {k: [v if v is None or isinstance(v, str) else str(v) for v in vs] for k, vs in got.items()}
            want_vals = {k: [v if v is None or isinstance(v, str) else str(v) for v in vs] for k, vs in want.items()}
            if got_vals != want_vals:
                problems.append(f"{name}: new profile holds {got}, want {want}")
        # appended to the profile it came from, its types
        r = s.put("t/" + name, s.path(name + ".csv"))
        if r.returncode != 0:
            problems.append(f"{name}: append failed: {out(r)}")
        else:
            got = s.doget("t/" + name).to_pydict()
            doubled = {k: v + v for k, v in want.items()}
            if got != doubled:
                problems.append(f"{name}: after the append holds {got}, want {doubled}")
    for p in problems:
        print(p)
    verdict(not problems, "every table read back as it was written", "; ".join(problems) or "as written")
finally:
    s.cleanup()
