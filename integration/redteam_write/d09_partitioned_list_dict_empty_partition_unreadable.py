"""r09: partitioned put, list<dictionary> column, a partition whose lists are all empty/null: acknowledged, then every read panics.

Bug: a write partitioned by `p` with a list<dictionary<int32, string>>
column ("tags"), where the rows of one partition hold only empty (or null)
lists — e.g. tags [["a"], []] with p [0, 1] — is acknowledged, but every
DoGet of the profile fails with INTERNAL "internal error (see server log)";
the log shows a recovered nil-pointer panic: "read …: join batches:
arrow/concat: runtime error: invalid memory address or nil pointer
dereference". `compact` fails too ("panic (a server bug): runtime error:
invalid memory address or nil pointer dereference"), so the version can never
be read or repaired through Quiver. (pyarrow reads the files.)

Severity: CRITICAL (acknowledged data unreadable through Quiver; a server
panic on every read; an everyday shape — a tags column on a day without tags).

Expected: DoGet returns the rows ([["a"], []] with their p), or the put is
refused with a clear error and nothing committed.
"""
import os, sys
import pyarrow as pa, pyarrow.flight as fl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, compact, report


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        tags = pa.ListArray.from_arrays(pa.array([0, 1, 1], pa.int32()),
                                        D(pa.array([0], pa.int32()), pa.array(["a"])))
        b = pa.record_batch([tags, pa.array([0, 1], pa.int32())], names=["tags", "p"])
        try:
            put(c, "blog/posts", [b], b.schema, partition_by=["p"])
        except (fl.FlightError, pa.ArrowException) as e:
            print("refused (acceptable):", str(e)[:200])
            return 0
        print("put acknowledged")
        for label in ("DoGet", "after compact"):
            if label == "after compact":
                try:
                    compact(c, "blog/posts")
                except (fl.FlightError, pa.ArrowException) as e:
                    print("compact failed:", str(e)[:150])
                    bad.append("compact failed")
                    break
            try:
                t = get(c, "blog/posts").sort_by("p")
                if t.column("tags").to_pylist() != [["a"], []] or t.column("p").to_pylist() != [0, 1]:
                    bad.append(label + " reads back different: %r" % t.to_pydict())
                else:
                    print(label, "ok")
            except (fl.FlightError, pa.ArrowException) as e:
                print(label, "failed:", str(e)[:150])
                bad.append(label + " unreadable")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
