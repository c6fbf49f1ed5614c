#!/usr/bin/env python3
"""e10 (LOW): when a put's schema (the first DoPut message: many or long column
names) is over the server's --max-recv-msg-size, the error blames batch
slicing ("slices batches above 4194304 bytes, too close to the server's limit
... --max-batch-bytes ... sets the size") and, with a small --max-batch-bytes,
"send fewer rows per batch". Neither helps: the same 1.5 MB message is refused
with --max-batch-bytes 1KiB. Expected: a message naming the schema/column
count as the cause (only raising the limit or fewer/shorter columns helps).
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *

s = Server("--max-recv-msg-size", "1048576")
try:
    cols = {("c%05d_" % i) + "n" * 200: pa.array([1]) for i in range(6000)}
    pq.write_table(pa.table(cols), s.path("w.parquet"))
    msgs = []
    for mb in ["4MiB", "1KiB"]:
        r = s.put("z/w", s.path("w.parquet"), extra=("--max-batch-bytes", mb))
        print(f"--max-batch-bytes {mb}: exit {r.returncode}: {out(r)[:400]}\n")
        msgs.append(out(r))
    ok = all(("schema" in m.lower() or "column" in m.lower()) and "fewer rows" not in m for m in msgs)
    verdict(ok, "an error naming the schema / the number of columns as the cause",
            "the error gives batch-slicing advice; slicing to 1KiB leaves the same message size")
finally:
    s.cleanup()
