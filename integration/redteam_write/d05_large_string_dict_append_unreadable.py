"""r05: appending a pandas categorical (dictionary<int8, large_string>) makes the profile unreadable (INTERNAL).

Bug: pa.Table.from_pandas turns a pandas Categorical into
dictionary<int8, large_string>. A write of such a table followed by an
append of another one (different categories) — the everyday
"q.write(df1); q.append(df2)" — is acknowledged twice, but every DoGet of
the profile then fails with INTERNAL "internal error (see server log)"; the
server log says "join batches: unimplemented dictionary value type,
large_utf8". The same for dictionary<…, large_binary>. Nothing in the put
warned; all readers of the profile are broken until someone compacts it.
(dictionary<…, string> and other value types join fine.) The official Python
client hits it as written in its docs: q.write("cl/a", df1); q.append("cl/a",
df2); q.read("cl/a") -> FlightInternalError. Polars Categorical columns (dictionary<uint32, large_string>) written then
appended fail the same way. Compaction makes it readable again. The same "join batches" failure makes a schema-evolving append that
adds a nullable dictionary<…, large_string> column unreadable.

Severity: CRITICAL (acknowledged data unreadable through Quiver; triggered
by the most common source of dictionaries, pandas categoricals).

Expected: DoGet returns the rows of both puts with the declared schema
(dictionary<int8, large_string>), or the append is refused with a clear
error and nothing committed.
"""
import os, sys
import pyarrow as pa, pyarrow.flight as fl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, report


def main():
    import pandas as pd
    p, d, data, c = start_server()
    bad = []
    try:
        t1 = pa.Table.from_pandas(pd.DataFrame({"cat": pd.Categorical(["a", "b", "a"]), "x": [1, 2, 3]}), preserve_index=False)
        t2 = pa.Table.from_pandas(pd.DataFrame({"cat": pd.Categorical(["c", "a"]), "x": [4, 5]}), preserve_index=False)
        print("schema:", t1.schema.field("cat").type)
        put(c, "shop/orders", t1.to_batches(), t1.schema)
        put(c, "shop/orders", t2.to_batches(), t1.schema, mode="append")
        print("both puts acknowledged")
        try:
            t = get(c, "shop/orders")
            if t.column("cat").to_pylist() != ["a", "b", "a", "c", "a"] or t.column("x").to_pylist() != [1, 2, 3, 4, 5]:
                bad.append("values differ: %r" % t.to_pydict())
            if t.schema.field("cat").type != t1.schema.field("cat").type:
                bad.append("type differs: %s" % t.schema.field("cat").type)
        except (fl.FlightError, pa.ArrowException) as e:
            print("DoGet failed:", str(e)[:200])
            bad.append("acknowledged data unreadable by DoGet")
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
