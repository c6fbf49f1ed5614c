"""r02: a dictionary column written plain expands into one giant page: ~1 MiB put -> 1.5 GB RSS, acknowledged, then DoGet DATA_LOSS.

Bug: when the batches of a put carry different dictionaries (here a first
batch with 300 short strings, then a batch whose dictionary is one 1 MiB
string; the order does not matter, a first batch of just ["a"] does it too),
the server writes the column dense/PLAIN: it materialises every row's value.
The second batch is ~1 MiB on the wire (300 indices pointing at one 1 MiB
value), but the server expands it to ~300 MiB in one Parquet data page
(server peak RSS ~1.5 GB; with a 4 MiB value and 500 rows: 6.3 GB and 19 s,
so a few such puts OOM the server). The put is acknowledged, yet the
committed file holds a data page of ~314 MB uncompressed, over arrow-go's
256 MiB page limit, so every DoGet of the profile fails with DATA_LOSS
"committed file v0/0.parquet does not decode: parquet: uncompressed page
size 314576297 exceeds configured limit 268435456" (pyarrow and polars read
the same file fine). The same 300 MiB sent as plain string batches is
written in bounded pages and reads back, so it is the dictionary -> dense
path that neither bounds memory nor cuts pages.

Severity: CRITICAL (acknowledged data unreadable through Quiver; a tiny put
makes the server allocate hundreds of times its size: memory DoS).

Expected: the put either stores the column so that it reads back (bounded
pages, or keep dictionary encoding), with memory bounded by --put-memory,
or is refused with a clear error and nothing committed.
"""
import os, sys
import pyarrow as pa, pyarrow.flight as fl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, hwm_kb, report


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        b1 = pa.record_batch([D(pa.array(list(range(300)), pa.int32()),
                                pa.array([f"u{i}" for i in range(300)]))], names=["c"])
        big = "y" * (1 << 20)
        b2 = pa.record_batch([D(pa.array([0] * 300, pa.int32()), pa.array([big]))], names=["c"])
        try:
            res = put(c, "big/dict", [b1, b2], b1.schema)
        except (fl.FlightError, pa.ArrowException) as e:
            print("put refused (acceptable):", str(e)[:300])
            res = None
        peak = hwm_kb(p.pid)
        print("server peak RSS: %.0f MiB" % (peak / 1024))
        if peak > 1024 * 1024:
            bad.append("server peak RSS %.0f MiB for a ~1 MiB put" % (peak / 1024))
        if res is not None:
            try:
                t = get(c, "big/dict")
                exp = pa.Table.from_batches([b1, b2])
                if t.num_rows != 600 or t.column("c").to_pylist() != exp.column("c").to_pylist():
                    bad.append("acknowledged put reads back different")
                else:
                    print("DoGet read back 600 rows")
            except (fl.FlightError, pa.ArrowException) as e:
                print("DoGet failed:", str(e)[:300])
                bad.append("acknowledged put unreadable by DoGet")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
