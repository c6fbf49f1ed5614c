"""r01: compacting a partitioned version that was itself produced by compaction
moves rows into garbage partitions (partition values read from freed/reused
memory) or fails with 'column "p" is malformed'; DoGet then serves invalid
UTF-8 / wrong partition values for acknowledged rows.

Expected (format.md "Compaction"): the new version holds exactly the rows of the
latest version, same schema/partitioning. Exit 0 only if every read after each
compaction returns the rows exactly as put."""
import sys, os, json, random, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qlib import *

PV = ["eu", "EU", "Eu", "é", "e\u0301", "a b", "a%2Fb", "a/b", "x" * 180, "日本", None, "..", "~"]
SCH = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string()), pa.field("p", pa.string())])
ctr = [0]
def mk(n):
    a = ctr[0]; ctr[0] += n
    i = list(range(a, a + n))
    return pa.Table.from_arrays([pa.array(i, pa.int64()), pa.array(["s%d" % v for v in i]),
                                 pa.array([PV[v % len(PV)] for v in i])], schema=SCH)

s = Server().start()
problems = []
try:
    c = s.client()
    put(c, {"path": "k/p", "mode": "write", "partition_by": ["p"]}, mk(30))
    rnd = random.Random(5)
    for _ in range(60):
        put(c, "k/p", mk(rnd.randint(1, 40)))
    expected = {i: ("s%d" % i, PV[i % len(PV)]) for i in range(ctr[0])}

    def check(tag):
        t = get(c, "k/p")
        ids = t.column("id").to_pylist()
        try:
            ss = t.column("s").to_pylist(); ps = t.column("p").to_pylist()
        except Exception as e:
            problems.append("%s: DoGet served invalid data: %s" % (tag, e)); return
        got = {i: (a, b) for i, a, b in zip(ids, ss, ps)}
        if len(ids) != len(expected) or got != expected:
            wrong = [(i, expected.get(i), got.get(i)) for i in ids if got.get(i) != expected.get(i)]
            problems.append("%s: %d rows (expected %d), %d wrong, e.g. %r" % (tag, len(ids), len(expected), len(wrong), wrong[:3]))

    check("before compaction")
    for k in range(4):
        try:
            v = action(c, "compact", {"path": "k/p"})[0]["version"]
            print("compact ->", v)
        except Exception as e:
            print("compact failed:", str(e)[:160])
            problems.append("compaction %d failed: %s" % (k, str(e)[:160]))
        check("after compaction %d" % k)
        if problems:
            break
    vdir = os.path.join(s.data_dir, "k", "p", json.load(open(os.path.join(s.data_dir, "k/p/manifest.json")))["latest_data_dir"])
    print("partition dirs of latest:", sorted(x for x in os.listdir(vdir) if x.startswith("p="))[:20])
    if s.panics(): problems.append("panic in log")
finally:
    s.cleanup()
for p in problems: print(" -", p)
result(not problems, "%d problem(s)" % len(problems))
