"""r08: a null stored in the dictionary (not in the indices) is silently written as "" / 0 / 1970-01-01.

Bug: Arrow allows a dictionary array's null to live in the dictionary (a
valid index pointing at a null dictionary entry). Quiver normally refuses
such a column ("writing DictionaryArray with null encoded in dictionary not
yet supported"). But when the table has more than one column and an earlier
batch of the same put carried a different dictionary, the put is
acknowledged and the null is stored as the value type's zero: "" for
strings, 0 for int64, 0.0 for float64, 1970-01-01 for date32. DoGet, pyarrow
and polars on the stored file and the version after `compact` all return
the fabricated value; nothing says a null was lost. Same with append mode
and with any index type.

Severity: CRITICAL (silent corruption of acknowledged data: nulls become
plausible real values).

Expected: the null reads back as null (e.g. move dictionary nulls into the
indices' validity before encoding), or the put is refused as it is for a
single-column table, with nothing committed.
"""
import os, sys
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, latest_files, report


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        cases = [("string", pa.string(), ["a", "b"], ["q", None]),
                 ("int64", pa.int64(), [1, 2], [7, None]),
                 ("date32", pa.date32(), [1, 2], [3, None])]
        for name, vt, v1, v2 in cases:
            b1 = pa.record_batch([D(pa.array([0, 1], pa.int32()), pa.array(v1, vt)), pa.array([1, 2])], names=["c", "x"])
            # row 3: index 1 -> dictionary entry null, i.e. the value is null
            b2 = pa.record_batch([D(pa.array([1, 0], pa.int32()), pa.array(v2, vt)), pa.array([3, 4])], names=["c", "x"])
            exp = [x for b in (b1, b2) for x in b.column(0).to_pylist()]
            path = "nd/" + name
            try:
                put(c, path, [b1, b2], b1.schema)
            except (fl.FlightError, pa.ArrowException) as e:
                print(name, "refused (acceptable):", str(e)[:150])
                continue
            got = get(c, path).column("c").to_pylist()
            direct = [x for f in latest_files(data, path) for x in pq.read_table(f).column("c").to_pylist()]
            print(name, "put", exp, "DoGet", got, "file", direct)
            if got != exp:
                bad.append(name + ": DoGet returned %r for %r" % (got, exp))
            if direct != exp:
                bad.append(name + ": stored file holds %r" % (direct,))
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
