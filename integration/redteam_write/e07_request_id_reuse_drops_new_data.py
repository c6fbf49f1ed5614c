#!/usr/bin/env python3
"""e07 (HIGH): re-using a --request-id for a put of *different* data (another
file, another --mode) exits 0 and prints "committed ..." -- the earlier
commit's record, word for word, also with --json -- and stores nothing.

The README tells users to re-run an interrupted put with --request-id; a
script that keeps one id per job name, or a user who re-runs with the id after
fixing the input file, gets a success message while the new rows are dropped.
Expected: a put whose content (files, mode, rows) differs from the one the id
committed is refused, or at least the output says it was a replay that wrote
nothing.
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *

s = Server()
try:
    pq.write_table(pa.table({"a": list(range(1000))}), s.path("a.parquet"))
    pq.write_table(pa.table({"a": [7, 8, 9, 10, 11]}), s.path("b.parquet"))
    r = s.put("k/p", s.path("a.parquet"), extra=("--request-id", "job-42"))
    assert r.returncode == 0, out(r)
    r2 = s.put("k/p", s.path("b.parquet"), extra=("--request-id", "job-42"))
    print("second put (other file, same id):", r2.returncode, out(r2).splitlines()[0])
    r3 = s.put("k/p", s.path("b.parquet"), extra=("--request-id", "job-42", "--mode", "write", "--json"))
    print("third put (--mode write, same id):", r3.returncode, out(r3)[:160])
    rows = s.doget("k/p").column("a").to_pylist()
    has_b = 7 in rows[1000:] or rows == [7, 8, 9, 10, 11]
    said = any(w in (out(r2) + out(r3)).lower() for w in ("already", "replay", "nothing written", "differ"))
    ok = has_b or r2.returncode != 0 or said
    verdict(ok, "the 5 new rows stored, or the put refused / told it was a replay",
            f"exit {r2.returncode} and {r3.returncode} with 'committed', profile holds {len(rows)} rows, 5 new rows absent")
finally:
    s.cleanup()
