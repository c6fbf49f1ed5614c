"""r02: a put holding a column of Arrow type `null` next to another column is
acknowledged, but the Parquet file Quiver writes does not decode (DATA_LOSS on
every read; pyarrow cannot read it either). Through schema evolution (an append
adding a nullable `null`-typed column) one writer makes every earlier
acknowledged row of the version unreadable by a plain DoGet, and compaction
fails, while verify says ok.

Expected (clients.md type table: "null type ✔ ✔"; format.md "Values are never
changed"): the put round-trips, or is refused with InvalidArgument and commits
nothing."""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qlib import *

s = Server().start()
problems = []
try:
    c = s.client()
    # 1. a first put with a null-typed column beside an int column
    t = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "x": pa.nulls(3)})
    acked = False
    try:
        put(c, "t/nulltype", t); acked = True
    except Exception as e:
        print("put refused:", str(e)[:120])
    if acked:
        try:
            g = get(c, "t/nulltype")
            if g.to_pylist() != t.to_pylist(): problems.append("acked put reads back different rows")
        except Exception as e:
            problems.append("acked put with null-typed column is unreadable: " + str(e)[:140])
    # 2. evolution: earlier acknowledged rows become unreadable
    put(c, {"path": "e/v", "schema_version": "1.0.0"}, pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    evolved = False
    try:
        put(c, {"path": "e/v", "schema_version": "1.1.0"}, pa.table({"id": pa.array([4], pa.int64()), "z": pa.nulls(1)})); evolved = True
    except Exception as e:
        print("evolving append refused:", str(e)[:120])
    try:
        g = get(c, "e/v")
        want = [1, 2, 3, 4] if evolved else [1, 2, 3]
        if g.column("id").to_pylist() != want: problems.append("e/v reads wrong rows")
    except Exception as e:
        problems.append("previously acknowledged rows of e/v are unreadable after another writer's append: " + str(e)[:140])
    try:
        action(c, "compact", {"path": "e/v"})
    except Exception as e:
        problems.append("compaction of e/v fails: " + str(e)[:100])
    vr = action(c, "verify", {})[0]
    print("verify ok:", vr["ok"])
    if s.panics(): problems.append("panic in log")
finally:
    s.cleanup()
for p in problems: print(" -", p)
result(not problems, "%d problem(s)" % len(problems))
