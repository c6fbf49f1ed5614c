#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c02 (CRITICAL): `quiver put` of NDJSON silently drops a field that first
appears after line 1000.

The column set is inferred from the first 1000 lines; a key that appears only
later is dropped without a word. The put is acknowledged ("1,001 rows") and the
value is gone: nothing stored, no error, no warning. Expected: the put is refused
naming the line and the key (as a type conflict in the first 1000 lines is), or
the column is added.
"""
s = Server()
rc = 1
try:
    p = s.tmp + "/events.ndjson"
    with open(p, "w") as f:
        f.write('{"id": 1}\n' * 1000)
        f.write('{"id": 2, "amount": "123.45 EUR"}\n')      # line 1001 brings a new key
    r = s.put("nd/events", p)
    print("put exit", r.returncode, r.stderr.decode().strip())
    if r.returncode == 0:
        t = s.doget("nd/events")
        print("stored schema:", t.schema.to_string(show_schema_metadata=False).replace("\n", "; "))
        print("last row:", t.to_pylist()[-1])
        if "amount" not in t.column_names:
            print("expected: the put refused (naming line 1001 / key \"amount\"), or the column stored")
            print("BUG: put acknowledged, key \"amount\" of line 1001 silently dropped")
        else:
            print("OK: column kept"); rc = 0
    else:
        print("OK: refused"); rc = 0 if "amount" in r.stderr.decode() else 1
        if rc: print("refused, but the message does not name the key")
finally:
    s.cleanup()
sys.exit(rc)
