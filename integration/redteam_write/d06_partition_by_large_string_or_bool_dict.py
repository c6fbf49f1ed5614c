"""r06: partition_by a dictionary<…, large_string> (pandas categorical) or dictionary<…, bool> column: acknowledged, never readable.

Bug: the docs allow partitioning by "dictionaries of" strings and booleans.
A write with partition_by a dictionary<int8, large_string> column (what
pa.Table.from_pandas makes of a pandas Categorical) or a
dictionary<int32, bool> column is acknowledged, but every DoGet fails with
INTERNAL "internal error (see server log)" (log: "join batches:
unimplemented dictionary value type, large_utf8" / "bool"); `compact`
commits a new version that fails the same way, so the data can never be
read through Quiver.
(dictionary<…, string> partition columns work.)

Severity: CRITICAL (acknowledged data unreadable through Quiver, no
recovery by compaction).

Expected: DoGet returns the rows with the partition column restored in its
declared dictionary type, or the put is refused with a clear
InvalidArgument and nothing committed.
"""
import os, sys
import pyarrow as pa, pyarrow.flight as fl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, compact, report


def main():
    import pandas as pd
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        t1 = pa.Table.from_pandas(pd.DataFrame({"region": pd.Categorical(["eu", "us", "eu"]), "x": [1, 2, 3]}), preserve_index=False)
        b2 = pa.record_batch([D(pa.array([0, 1, 0], pa.int32()), pa.array([True, False])), pa.array([1, 2, 3])], names=["flag", "x"])
        cases = [("p/cat", t1.to_batches(), t1.schema, "region"), ("p/flag", [b2], b2.schema, "flag")]
        for path, bs, schema, col in cases:
            try:
                put(c, path, bs, schema, partition_by=[col])
            except (fl.FlightError, pa.ArrowException) as e:
                print(path, "refused (acceptable):", str(e)[:200])
                continue
            exp = sorted(zip(*[pa.Table.from_batches(bs).column(n).to_pylist() for n in schema.names]))
            for label in ("DoGet", "after compact"):
                if label == "after compact":
                    try:
                        compact(c, path)
                    except (fl.FlightError, pa.ArrowException) as e:
                        print(path, "compact failed:", str(e)[:150])
                        bad.append(path + ": compact failed")
                        break
                try:
                    t = get(c, path)
                    got = sorted(zip(*[t.column(n).to_pylist() for n in schema.names]))
                    if got != exp or not t.schema.field(col).type.equals(schema.field(col).type):
                        bad.append(path + ": " + label + " reads back different")
                    else:
                        print(path, label, "ok")
                except (fl.FlightError, pa.ArrowException) as e:
                    print(path, label, "failed:", str(e)[:150])
                    bad.append(path + ": " + label + " unreadable")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
