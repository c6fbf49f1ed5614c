#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c03 (MEDIUM): `quiver put` of NDJSON silently converts values of another JSON
type after line 1000 (and refuses the same mix within the first 1000 lines).

In the first 1000 lines a column holding both `true` and `1`, or `1.5` and
`"NaN"`, is refused ("holds both bool and int64 values"). After line 1000 the
same values are converted silently: 1 -> true, 0 -> false, the string "NaN" ->
a float NaN, the string "1" -> integer 1, "1.5" -> 1.5. The put is
acknowledged with altered values and types. Expected: refused like the same mix
earlier in the file, naming the line and the column.
"""
s = Server()
rc = 0
try:
    cases = [("true", "1", True), ("true", "0", False), ("1.5", '"NaN"', None), ("1", '"1"', 1), ("1.5", '"1.5"', 1.5)]
    for i, (first, late, _) in enumerate(cases):
        early = s.tmp + f"/early{i}.ndjson"; open(early, "w").write('{"a": %s}\n{"a": %s}\n' % (first, late))
        p = s.tmp + f"/late{i}.ndjson"; open(p, "w").write(('{"a": %s}\n' % first) * 1000 + '{"a": %s}\n' % late)
        re_ = s.put(f"nd/early{i}", early)
        r = s.put(f"nd/late{i}", p)
        stored = None
        if r.returncode == 0:
            stored = s.doget(f"nd/late{i}").column("a")[-1]
        print(f"column of {first}, value {late}: within first 1000 lines -> "
              f"{'refused: ' + re_.stderr.decode().strip()[:90] if re_.returncode else 'accepted'}; "
              f"at line 1001 -> {'refused' if r.returncode else 'STORED as ' + repr(stored.as_py()) + ' (' + str(stored.type) + ')'}")
        if r.returncode == 0 and re_.returncode != 0:
            rc = 1
    print("expected: line 1001 refused like the same mix in the first 1000 lines")
    print("BUG: values of another JSON type silently converted" if rc else "OK")
finally:
    s.cleanup()
sys.exit(rc)
