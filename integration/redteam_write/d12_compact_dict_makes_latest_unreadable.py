"""r12: `compact` of two small, readable dictionary files commits a version that DoGet cannot read (DATA_LOSS), using 1.5 GB.

Bug: a profile with a dictionary<int32, string> column gets two puts — a
write and an append — each of 300 rows pointing at one 1 MiB dictionary
value ("a"*1Mi, then "b"*1Mi). Each file is ~1.3 KB (dictionary encoded) and
the profile reads back fine. `compact` (also what --auto-compact runs) reads
both files, sees two different dictionaries, writes the column dense/PLAIN
into one ~380 MB data page (server peak RSS ~1.5 GB for 2.6 KB of input) and
commits it as the new latest version. Every DoGet then fails with DATA_LOSS
"committed file v1/0.parquet does not decode: parquet: uncompressed page size
380634547 exceeds configured limit 268435456", and `verify` has nothing to
say because the hashes match. Same root cause as r02 (the dictionary ->
dense path neither bounds memory nor cuts pages), but here no client did
anything unusual: a routine maintenance action breaks a healthy profile.

Severity: CRITICAL (compaction makes acknowledged data unreadable through
Quiver; memory amplification ~600,000x).

Expected: the compacted version reads back the same 600 rows (keep the
dictionary encoding or bound pages), with memory bounded; or compaction
fails and commits nothing.
"""
import os, sys
import pyarrow as pa, pyarrow.flight as fl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, compact, hwm_kb, report


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        mk = lambda ch: pa.record_batch([D(pa.array([0] * 300, pa.int32()), pa.array([ch * (1 << 20)])),
                                         pa.array(range(300))], names=["c", "x"])
        r1 = put(c, "ops/events", [mk("a")], mk("a").schema)
        r2 = put(c, "ops/events", [mk("b")], mk("a").schema, mode="append")
        print("file sizes", r1["files"][0]["bytes"], r2["files"][0]["bytes"])
        before = get(c, "ops/events")
        print("before compact: DoGet", before.num_rows, "rows")
        try:
            res = compact(c, "ops/events")[0]
            print("compact committed", res["version"], [f["bytes"] for f in res["files"]])
        except (fl.FlightError, pa.ArrowException) as e:
            print("compact refused (acceptable):", str(e)[:200])
            res = None
        peak = hwm_kb(p.pid)
        print("server peak RSS: %.0f MiB" % (peak / 1024))
        if peak > 1024 * 1024:
            bad.append("server peak RSS %.0f MiB to compact 2.6 KB of files" % (peak / 1024))
        if res is not None:
            try:
                after = get(c, "ops/events")
                if after.column("c").to_pylist() != before.column("c").to_pylist():
                    bad.append("compacted version reads back different")
                else:
                    print("after compact: DoGet ok")
            except (fl.FlightError, pa.ArrowException) as e:
                print("after compact: DoGet failed:", str(e)[:250])
                bad.append("compacted latest version unreadable by DoGet")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
