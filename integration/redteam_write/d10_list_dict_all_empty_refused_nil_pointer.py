"""r10: a valid list<dictionary> batch whose lists are all empty is refused with a recovered nil-pointer panic as the message.

Bug: a put of one batch whose list<dictionary<int32, string>> column holds
only empty lists (the dictionary child has 0 rows; the dictionary itself is
["a"]) — valid Arrow, e.g. a "tags" column where no row has tags yet — is
refused with INVALID_ARGUMENT "the data cannot be stored as Parquet: unknown
error type: runtime error: invalid memory address or nil pointer
dereference". That is a server panic (recovered) reported as the client's
fault, with no hint of what is wrong; the same table with a string list
column, or with one non-empty list, is accepted.

Severity: MEDIUM (valid data refused; unclear error exposing an internal
panic).

Expected: the put is acknowledged and reads back (two empty lists), or is
refused with a clear message naming the column and the unsupported shape.
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
        tags = pa.ListArray.from_arrays(pa.array([0, 0, 0], pa.int32()),
                                        D(pa.array([], pa.int32()), pa.array(["a"])))
        b = pa.record_batch([tags], names=["tags"])
        b.validate(full=True)
        try:
            put(c, "blog/drafts", [b], b.schema)
            t = get(c, "blog/drafts")
            print("acknowledged; read back", t.column("tags").to_pylist(), t.schema.field("tags").type)
            if t.column("tags").to_pylist() != [[], []] or not t.schema.equals(b.schema):
                bad.append("reads back different")
        except (fl.FlightError, pa.ArrowException) as e:
            msg = str(e)
            print("refused:", msg[:250])
            if "nil pointer" in msg or "runtime error" in msg or "unknown error type" in msg:
                bad.append("valid data refused with an internal panic as the message")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
