#!/usr/bin/env python3
"""e03 (MEDIUM): a float64 column with ±Inf does not survive `quiver get
--format csv` -> `quiver put`; the CSV then cannot be appended to its own profile.

`quiver get --format csv` writes +Inf/-Inf as "+Inf"/"-Inf" (pyarrow writes
inf/-inf and reads "+Inf" back as a double). `quiver put`'s CSV inference does
not take "+Inf", "Inf" or "Infinity" as a float (it takes "inf", "-inf", "NaN",
"-NaN" but not "nan"), so the column becomes a string column: a new profile gets
the wrong type, and an append to the source profile is refused with
`"f" is utf8 in this put but float64 in the profile`.
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *
import pyarrow.csv as pc

s = Server()
try:
    t = pa.table({"id": [1, 2, 3, 4], "f": [1.5, float("inf"), float("-inf"), float("nan")]})
    pq.write_table(t, s.path("src.parquet"))
    assert s.put("t/src", s.path("src.parquet")).returncode == 0
    r = s.get("t/src", "--format", "csv", "-o", s.path("out.csv"))
    assert r.returncode == 0, out(r)
    print("quiver get csv:", open(s.path("out.csv")).read().replace("\n", " | "))
    print("pyarrow reads it as:", pc.read_csv(s.path("out.csv")).schema.field("f").type)
    r1 = s.put("t/copy", s.path("out.csv"))
    typ = str(s.doget("t/copy").schema.field("f").type) if r1.returncode == 0 else "refused: " + out(r1)
    r2 = s.put("t/src", s.path("out.csv"))   # append the profile's own CSV back
    # the inference rule itself, on the usual spellings of infinity and NaN
    spell = {}
    for v in ["inf", "Inf", "+Inf", "Infinity", "NaN", "nan"]:
        rr = s.put("t/sp" + str(len(spell)), s.write(f"sp{len(spell)}.csv", f"f\n1.5\n{v}\n"))
        spell[v] = str(s.doget("t/sp" + str(len(spell))).schema.field("f").type) if rr.returncode == 0 else "refused"
    print("inferred type of a column [1.5, X]:", spell)
    ok = typ == "double" and r2.returncode == 0
    verdict(ok, "put of the CSV gives f: double; appending it to t/src succeeds",
            f"new profile f: {typ}; append to t/src: exit {r2.returncode} {out(r2)[:140]}")
finally:
    s.cleanup()
