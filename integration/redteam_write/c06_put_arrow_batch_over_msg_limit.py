#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c06 (MEDIUM): `quiver put` of an Arrow IPC file/stream whose record batch is
larger than the server's --max-recv-msg-size fails with a raw gRPC error, while
the same rows from Parquet go through.

The client cuts Parquet input into messages under the limit, but sends each
Arrow IPC batch as it is. A 20 MB batch against a server with an 8 MiB limit
(the default is 128 MiB: the same happens to any larger Arrow batch, e.g. one
written by pandas/polars in a single chunk) is refused with
"grpc: received message larger than max (21600169 vs. 8388608)", which names
neither the batch, nor the server limit's flag, nor a fix. Expected: the client
slices big batches (rows are independent) or says clearly what to do.
"""
s = Server("--max-recv-msg-size", str(8 << 20))
rc = 1
try:
    n = 400_000
    t = pa.table({"s": pa.array(["x" * 50] * n)})          # one 20 MB batch
    pq.write_table(t, s.tmp + "/big.parquet", row_group_size=n)
    write_stream(s.tmp + "/big.arrows", t.to_batches(), t.schema)
    with ipc.new_file(s.tmp + "/big.arrow", t.schema) as w: w.write_table(t)
    rp = s.put("b/parquet", s.tmp + "/big.parquet")
    print("parquet:", "ok" if rp.returncode == 0 else rp.stderr.decode().strip())
    bad = False
    for f in ["big.arrows", "big.arrow"]:
        r = s.put("b/" + f.replace(".", "_"), s.tmp + "/" + f, extra=("--format", "arrow"))
        print(f + ":", "ok" if r.returncode == 0 else r.stderr.decode().strip())
        if r.returncode != 0: bad = True
    if bad and rp.returncode == 0:
        print("expected: the Arrow input put like the Parquet one (the client slices batches)")
        print("BUG: Arrow IPC batch over the message limit refused with a bare gRPC error")
    else:
        print("OK"); rc = 0
finally:
    s.cleanup()
sys.exit(rc)
