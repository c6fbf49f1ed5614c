#!/usr/bin/env python3
"""e08 (MEDIUM): `quiver get -o -` in CSV (the default on a pipe) leaves a
well-formed CSV when the read fails part-way: every reader takes it as the
whole result.

Third of three files damaged on disk: the read fails (DATA_LOSS), the client
exits 1, but stdout holds a valid CSV with 2,000 of 3,000 rows, cut at a line
boundary; `quiver get p | other-tool` goes on with partial data (a pipeline
without `pipefail` never sees the exit status). The Arrow and Parquet outputs
are now left unreadable (c07); CSV is documented as "check the exit status".
Expected, as for the other formats: the output left unfinished so that CSV
readers reject it, e.g. end it with a line holding an unclosed quote (pyarrow,
polars and DuckDB all refuse that).
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *
import pyarrow.csv as pc

s = Server("--endpoint-bytes", "1")
try:
    for k in range(3):
        t = pa.table({"id": pa.array(range(k * 1000, k * 1000 + 1000)), "s": [f"row{i}" for i in range(1000)]})
        pq.write_table(t, s.path(f"b{k}.parquet"))
        assert s.put("cr/p", s.path(f"b{k}.parquet")).returncode == 0
    f = os.path.join(s.data, "cr/p/v0/2.parquet")
    data = bytearray(open(f, "rb").read())
    for i in range(100, 400):
        data[i] ^= 0x5a
    os.chmod(f, 0o644)
    open(f, "wb").write(data)
    res = {}
    for fmt in [None, "csv"]:
        o = s.path("out.csv")
        args = [QUIVER, "get", "cr/p", "--server", s.addr, "-o", "-", "--parallel", "1"] + (["--format", fmt] if fmt else [])
        with open(o, "wb") as fo:
            r = subprocess.run(args, stdout=fo, stderr=subprocess.PIPE)
        try:
            n = pc.read_csv(o).num_rows
            res[fmt or "pipe default"] = f"exit {r.returncode}, stdout a valid CSV of {n} of 3000 rows"
        except Exception as e:
            res[fmt or "pipe default"] = f"exit {r.returncode}, stdout not readable: {str(e)[:60]}"
        print(fmt, res[fmt or "pipe default"], "|", r.stderr.decode().strip()[:100])
    ok = all("valid CSV" not in v for v in res.values())
    verdict(ok, "a failed read leaves CSV output a CSV reader refuses", "; ".join(f"{k}: {v}" for k, v in res.items()))
finally:
    s.cleanup()
