#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c05 (MEDIUM): `quiver put` of a Parquet file with INT96 timestamps changes the
column type from a naive timestamp to timestamp[ns, tz=UTC].

INT96 is what Spark, Hive and Impala write (and pyarrow with
use_deprecated_int96_timestamps=True). The file's own Arrow schema says
`timestamp[ns]` (no time zone) and pyarrow reads it as that; Quiver's client
reads it as timestamp[ns, tz="UTC"] and the profile's frozen schema becomes
zone-aware. A later append of the same data from a pyarrow client (naive) then
no longer matches; readers see a different type than was written.
"""
s = Server()
rc = 1
try:
    t = pa.table({"ts": pa.array([0, 10**18, None], pa.timestamp("ns"))})
    pq.write_table(t, s.tmp + "/spark.parquet", use_deprecated_int96_timestamps=True)
    print("pyarrow reads the input as:", pq.read_schema(s.tmp + "/spark.parquet").field("ts").type)
    r = s.put("ts/p", s.tmp + "/spark.parquet"); assert r.returncode == 0, r.stderr
    got = s.doget("ts/p").schema.field("ts").type
    print("Quiver stored / DoGet returns:", got)
    # an append of the original (naive) table by Arrow IPC
    write_stream(s.tmp + "/naive.arrows", t.to_batches(), t.schema)
    r3 = s.put("ts/p", s.tmp + "/naive.arrows")
    print("append of the same naive timestamps:", "ok" if r3.returncode == 0 else r3.stderr.decode().strip()[:200])
    if got != pa.timestamp("ns"):
        print("expected: timestamp[ns] (as in the file's Arrow schema)")
        print("BUG: type changed to", got)
    else:
        print("OK"); rc = 0
finally:
    s.cleanup()
sys.exit(rc)
