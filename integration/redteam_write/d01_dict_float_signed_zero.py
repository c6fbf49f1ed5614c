"""r01: dictionary<…, float64/float32> values 0.0 and -0.0 are merged (silent value change).

Bug: a put whose batches carry dictionaries of floats, one holding -0.0 and a
later one holding 0.0 (or the reverse), is acknowledged, but every row comes
back with the sign of whichever zero was seen first: DoGet, pyarrow reading the
stored file directly, and polars all return -0.0 where 0.0 was put. The same
happens on the read path across files: a write of dictionary [0.0] followed by
an append of dictionary [-0.0] reads back through DoGet as [0.0, 0.0] (after
`compact` it reads back [0.0, -0.0] — so two reads of the same data disagree).
NaN payloads are merged the same way. Looks like the dictionary memo
(hash table keyed by float ==) unifying per-batch dictionaries.
The same values as a plain float64 column round-trip bit-exactly.

Severity: MEDIUM (acknowledged data reads back different; signed zero is
observable, e.g. 1/x, copysign, and the docs promise "values are never
changed" and list ±0 as tested).

Expected: the values read back are bit-identical to what was put (dictionary
unification must compare floats bitwise), or the put is refused.

Note (Quiver, 2026-12-01): with dictionaries [-0.0] then [0.0] in one put,
pyarrow's own IPC writer does not send the second dictionary (it equals the
first by ==), so the server never sees 0.0; case 1 therefore uses
dictionaries pyarrow does send ([-0.0, 1.0] then [0.0]). arrow-go's IPC
writer did the same on DoGet (within 1e-5, NaNs equal): that was case 2.
Case 3 checks NaN payloads, and every case is read again after compact.
"""
import os, sys
import numpy as np
import pyarrow as pa, pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, compact, latest_files, report


def bits(t, col="v"):
    out = []
    for a in t.column(col).chunks:
        if pa.types.is_dictionary(a.type):
            a = a.dictionary_decode()
        out += a.cast(pa.float64()).to_numpy(zero_copy_only=False).view(np.int64).tolist()
    return out


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        mk = lambda z: pa.record_batch([D(pa.array([0, 0], pa.int32()), pa.array([z]))], names=["v"])
        # 1) one write, two batches: dictionaries [-0.0, 1.0] then [0.0]
        b1 = pa.record_batch([D(pa.array([0, 0], pa.int32()), pa.array([-0.0, 1.0]))], names=["v"])
        b2 = mk(0.0)
        exp = bits(pa.Table.from_batches([b1, b2]))
        put(c, "z/write", [b1, b2], b1.schema)
        got = bits(get(c, "z/write"))
        direct = [x for f in latest_files(data, "z/write") for x in bits(pq.read_table(f))]
        print("expected bits", exp, "\nDoGet        ", got, "\npyarrow file ", direct)
        if got != exp:
            bad.append("DoGet of one write changed the sign of zero")
        if direct != exp:
            bad.append("stored file holds a different sign of zero")
        # 2) write [0.0], append [-0.0]: read path
        put(c, "z/app", [mk(0.0)], b1.schema)
        put(c, "z/app", [mk(-0.0)], b1.schema, mode="append")
        exp2 = [0, 0, -2**63, -2**63]
        got2 = bits(get(c, "z/app"))
        print("write+append expected", exp2, "DoGet", got2)
        if got2 != exp2:
            bad.append("DoGet across write+append changed the sign of zero")
        # 3) NaN payloads: write [nan_a], append [nan_b]
        nan_a, nan_b = np.array([0x7FF8000000000001, 0x7FF8000000000002], np.int64).view(np.float64)
        put(c, "z/nan", [mk(nan_a)], b1.schema)
        put(c, "z/nan", [mk(nan_b)], b1.schema, mode="append")
        exp3 = [0x7FF8000000000001] * 2 + [0x7FF8000000000002] * 2
        got3 = bits(get(c, "z/nan"))
        print("NaN payloads expected", exp3, "DoGet", got3)
        if got3 != exp3:
            bad.append("DoGet across write+append changed NaN payloads")
        for path, want in (("z/write", exp), ("z/app", exp2), ("z/nan", exp3)):
            compact(c, path)
            got = bits(get(c, path))
            if got != want:
                bad.append("%s after compact reads %r, not %r" % (path, got, want))
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
