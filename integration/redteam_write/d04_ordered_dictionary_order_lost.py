"""r04: ordered dictionaries come back with their categories re-ordered (ordered=True kept).

Bug: a put of a dictionary<int8, string, ordered=True> column (a pandas
ordered categorical: small < medium < large < xl) whose batches carry
different dictionaries — here a second batch whose dictionary extends the
first one by "xl", as an IPC delta dictionary or a replacement, which is what
any stream of growing categories produces — is acknowledged, but the column
is stored PLAIN and read back (DoGet, pyarrow on the file, and after
`compact`) with its dictionary rebuilt in order of first appearance:
["large", "small", "medium", "xl"], still flagged ordered=True. The order of
an ordered dictionary is its meaning: read back, "large" < "small", so
pandas' .min() of the column says "large" where the data put says "small",
sorting by the categorical gives another order, etc. The schema compares
equal, so nothing tells the reader. A put whose batches share one dictionary
keeps the order.

Severity: MEDIUM (acknowledged data reads back with different semantics,
silently).

Expected: an ordered dictionary reads back in an order consistent with the
dictionary put (for each pair of values, the put's order), or the put is
refused with a clear error.
"""
import os, sys, json
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, latest_files, report, compact


def consistent(chunks, order):
    pos = {v: i for i, v in enumerate(order)}
    for c in chunks:
        ps = [pos[v] for v in c.dictionary.to_pylist()]
        if ps != sorted(ps):
            return False
    return True


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        order = ["small", "medium", "large", "xl"]
        b1 = pa.record_batch([D(pa.array([2, 0], pa.int8()), pa.array(order[:3]), ordered=True)], names=["size"])
        b2 = pa.record_batch([D(pa.array([1, 3], pa.int8()), pa.array(order), ordered=True)], names=["size"])
        put(c, "shop/sizes", [b1, b2], b1.schema)
        t = get(c, "shop/sizes")
        print("schema", t.schema.field("size").type)
        print("DoGet dictionaries", [ch.dictionary.to_pylist() for ch in t.column("size").chunks])
        if t.column("size").to_pylist() != ["large", "small", "medium", "xl"]:
            bad.append("values differ")
        if not consistent(t.column("size").chunks, order):
            bad.append("DoGet: ordered dictionary's order changed")
        try:
            mn = t.to_pandas()["size"].min()
            print("pandas min: put 'small', read back %r" % mn)
        except Exception as e:
            print("pandas:", e)
        f = latest_files(data, "shop/sizes")[0]
        if not consistent(pq.read_table(f).column("size").chunks, order):
            bad.append("stored file: order changed")
        compact(c, "shop/sizes")
        if not consistent(get(c, "shop/sizes").column("size").chunks, order):
            bad.append("after compact: order changed")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
