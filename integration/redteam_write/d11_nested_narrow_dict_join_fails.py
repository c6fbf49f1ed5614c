"""r11: struct/list of dictionary<int8, …>: a put of two batches is acknowledged, then DoGet fails "unified dictionary requires a larger index type".

Bug: the rework promises "batches read are joined only while their
dictionaries still fit" for narrow index types. A write of two batches of a
struct<d: dictionary<int8, string>> column (the same with
list<dictionary<int8, string>>) is acknowledged:
  batch 1: dictionary of 123 distinct strings, 110 of them used (300 rows);
  batch 2: dictionary of 128 entries holding 118 distinct strings (some
           repeated), 5 of them used (5 rows).
Every DoGet then fails with INTERNAL "internal error (see server log)"; the
log says "read …: join batches: arrow/array: cannot combine dictionaries.
unified dictionary requires a larger index type". (Found by a fuzzer that
also hit it with list<dictionary<uint8, float64>> over 6 batches.) pyarrow
reads the stored file fine. The same data as a top-level dictionary column
reads back.

Severity: HIGH (acknowledged data unreadable through Quiver until
compaction).

Expected: DoGet returns the 305 rows with the declared type, or the put is
refused with a clear error and nothing committed.
"""
import os, sys
import pyarrow as pa, pyarrow.flight as fl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, report


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        a = D(pa.array(list(range(110)) * 2 + list(range(80)), pa.int8()), pa.array([f"a{i}" for i in range(123)]))
        b = D(pa.array([0, 1, 2, 3, 4], pa.int8()), pa.array([f"b{i % 118}" for i in range(128)]))
        for kind in ("struct", "list"):
            def wrap(x):
                if kind == "struct":
                    return pa.StructArray.from_arrays([x], names=["d"])
                return pa.ListArray.from_arrays(pa.array([0, len(x)], pa.int32()), x)
            b1 = pa.record_batch([wrap(a)], names=["c"])
            b2 = pa.record_batch([wrap(b)], names=["c"])
            exp = [v for bb in (b1, b2) for v in bb.column(0).to_pylist()]
            path = "nest/" + kind
            try:
                put(c, path, [b1, b2], b1.schema)
            except (fl.FlightError, pa.ArrowException) as e:
                print(kind, "refused (acceptable):", str(e)[:150])
                continue
            try:
                t = get(c, path)
                ok = t.column("c").to_pylist() == exp and t.schema.equals(b1.schema)
                print(kind, "DoGet", "ok" if ok else "DIFFERENT")
                if not ok:
                    bad.append(kind + ": reads back different")
            except (fl.FlightError, pa.ArrowException) as e:
                print(kind, "DoGet failed:", str(e)[:150])
                bad.append(kind + ": acknowledged data unreadable by DoGet")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
