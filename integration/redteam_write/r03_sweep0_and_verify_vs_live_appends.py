"""r03: `sweep {"older_than_s": 0}` deletes the data files of appends that are
still in flight (their writer is alive), so those appends fail UNAVAILABLE
("a file of the put is gone before its commit (removed by sweep ...)"), and
`verify` run meanwhile reports files of live puts as `orphan` ("its writer
died before committing"), ok=false, although those files are committed a moment
later.

Docs (operations.md): "`sweep {"older_than_s": 0}` is safe while writes run";
format.md: orphan = "a put killed before its commit". Nothing acknowledged is
lost (the puts fail cleanly), but writers are failed and audits page falsely.
PASS only if no append fails because of the sweep and verify never flags a file
that ends up committed."""
import sys, os, json, threading, time, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qlib import *

s = Server().start()
KEY = "sw/a/b"
stop = time.time() + 20
lk = threading.Lock()
fails = collections.Counter(); acked = [0]; orphan_paths = set()
def writer(k):
    c = s.client(); n = 0
    while time.time() < stop:
        t = pa.table({"id": pa.array(range(k * 10**6 + n * 100, k * 10**6 + n * 100 + 50), pa.int64()), "s": ["x" * 20] * 50})
        n += 1
        try:
            put(c, KEY, t, batches=t.to_batches(max_chunksize=10))
            with lk: acked[0] += 1
        except Exception as e:
            with lk: fails[str(e)[:220]] += 1
def sweeper():
    c = s.client()
    while time.time() < stop:
        try: action(c, "sweep", {"older_than_s": 0})
        except Exception: pass
        try:
            v = action(c, "verify", {"path": KEY})[0]
            for p in v["problems"]:
                if p["kind"] == "orphan": orphan_paths.add(p["path"])
        except Exception: pass
problems = []
try:
    c = s.client()
    put(c, KEY, pa.table({"id": pa.array([-1], pa.int64()), "s": ["x"]}))
    th = [threading.Thread(target=writer, args=(k,)) for k in range(1, 11)] + [threading.Thread(target=sweeper)]
    [t.start() for t in th]; [t.join() for t in th]
    committed = set()
    for r in action(c, "lineage", {"path": KEY}):
        for f in r.get("files", []): committed.add(KEY + "/" + f["path"])
    false_orphans = orphan_paths & committed
    print("acked", acked[0], "failed", sum(fails.values()))
    for m, n in fails.items(): print("  %d x %s" % (n, m[:110]))
    swept = sum(n for m, n in fails.items() if "sweep" in m or "removed" in m or "gone" in m)
    if swept: problems.append("%d live appends failed because sweep removed their files" % swept)
    if false_orphans:
        problems.append("verify reported %d files of live puts as orphan, later committed, e.g. %s" % (len(false_orphans), sorted(false_orphans)[:2]))
    if s.panics(): problems.append("panic")
finally:
    s.cleanup()
for p in problems: print(" -", p)
result(not problems, "%d problem(s)" % len(problems))
