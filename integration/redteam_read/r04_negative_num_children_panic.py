#!/usr/bin/env python3
from common import *  # noqa: F401,F403 (the shared helpers, imports and temp dir)
# r04: a Parquet footer whose root schema element has a negative num_children
# (one byte changed in a valid pyarrow file) panics the footer parser
# ("runtime error: makeslice: cap out of range", recovered): the client gets
# INTERNAL "internal error" instead of the DATA_LOSS "corrupt file" answer
# that other footer corruptions (e.g. a huge num_children, an unknown logical
# type) get. Exit 1 while the bug is present.
bad = 0
p, c = start(int(os.environ.get("PORT", "19153")))
try:
    base = parquet_bytes(pa.table({"s": pa.array(["a", "b", None] * 5)}), compression="none")
    j = base.find(b"\x18\x06schema\x15\x02")   # name "schema", then num_children = 1 (zigzag 2)
    assert j > 0
    for v in (0x01, 0x7f):                      # zigzag -1, -64
        d = bytearray(base); d[j + 9] = v
        key = f"r04/nchildren_{v}"
        plant(key, bytes(d))
        n_before = log_text().count("panic recovered")
        try:
            doget(c, key); res = "OK (?)"
        except fl.FlightError as e:
            res = type(e).__name__ + ": " + str(e).split(". gRPC")[0]
        time.sleep(0.2)
        panicked = log_text().count("panic recovered") > n_before
        print(f"num_children zigzag byte {v:#x}: {res}; panic in log: {panicked}")
        bad += panicked or "internal error" in res
    assert p.poll() is None
finally:
    stop(p); shutil.rmtree(TMP, ignore_errors=True)
print("BUG PRESENT" if bad else "fixed")
sys.exit(1 if bad else 0)
