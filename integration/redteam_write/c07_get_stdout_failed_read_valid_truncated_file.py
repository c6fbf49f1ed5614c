#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c07 (MEDIUM): `quiver get -o -` (stdout) ends a failed read with a complete,
valid file holding only the rows read so far.

When the read fails part-way (here: a committed file is damaged on disk, DoGet
fails with DATA_LOSS on the third endpoint; also when `--format arrow` meets a
changed dictionary), the client prints the error and exits 1, but it has
already closed the output properly: the Arrow IPC file gets its footer, the
IPC stream its end-of-stream marker, the Parquet file its footer. Whatever
reads stdout (`quiver get ... -o - > x.parquet`, a pipe into another tool) gets
a well-formed file with 2,000 of 3,000 rows and no way to tell it is cut short.
Expected: on failure, never write the footer/EOS (so the truncation is
detectable), as `-o FILE` already leaves no file.
"""
s = Server("--endpoint-bytes", "1")
rc = 0
try:
    for k in range(3):
        t = pa.table({"id": pa.array(range(k * 1000, k * 1000 + 1000)), "s": pa.array([f"row{i}" for i in range(1000)])})
        pq.write_table(t, f"{s.tmp}/b{k}.parquet"); assert s.put("cr/p", f"{s.tmp}/b{k}.parquet").returncode == 0
    f = os.path.join(s.data, "cr/p/v0/2.parquet")
    data = bytearray(open(f, "rb").read())
    for i in range(100, 400): data[i] ^= 0x5a           # damage the third file
    os.chmod(f, 0o644); open(f, "wb").write(data)
    for fmt in ["arrow", "arrows", "parquet"]:
        o = f"{s.tmp}/out.{fmt}"
        with open(o, "wb") as fo:
            r = subprocess.run([QUIVER, "get", "cr/p", "--server", s.addr, "--format", fmt, "-o", "-", "--parallel", "1"],
                               stdout=fo, stderr=subprocess.PIPE)
        try:
            n = (ipc.open_file(o).read_all() if fmt == "arrow" else ipc.open_stream(o).read_all() if fmt == "arrows"
                 else pq.read_table(o)).num_rows
            state = f"a VALID {fmt} file with {n} of 3000 rows"
            if r.returncode != 0: rc = 1
        except Exception as e:
            state = f"not readable ({str(e)[:60]}): truncation detectable"
        print(f"--format {fmt} -o -: exit {r.returncode} ({r.stderr.decode().strip()[:70]}...), stdout holds {state}")
    # the same through the dictionary guard of --format arrow
    s2 = Server("--endpoint-bytes", "1")
    try:
        for k in range(3):
            b = pa.record_batch({"id": pa.array([k]), "d": pa.DictionaryArray.from_arrays(pa.array([0], pa.int32()), pa.array([f"v{k}"]))})
            write_stream(f"{s2.tmp}/d{k}.arrows", [b], b.schema); assert s2.put("d/p", f"{s2.tmp}/d{k}.arrows").returncode == 0
        with open(s2.tmp + "/o.arrow", "wb") as fo:
            r = subprocess.run([QUIVER, "get", "d/p", "--server", s2.addr, "--format", "arrow", "-o", "-"], stdout=fo, stderr=subprocess.PIPE)
        try:
            n = ipc.open_file(s2.tmp + "/o.arrow").read_all().num_rows
            print(f"--format arrow -o - refused a changed dictionary: exit {r.returncode}, stdout is a VALID Arrow file with {n} of 3 rows")
            if r.returncode != 0: rc = 1
        except Exception as e:
            print("dictionary case: output not readable (ok)")
    finally:
        s2.cleanup()
    print("expected: a failed get leaves stdout without footer / end-of-stream marker")
    print("BUG: failed reads produce well-formed truncated files on stdout" if rc else "OK")
finally:
    s.cleanup()
sys.exit(rc)
