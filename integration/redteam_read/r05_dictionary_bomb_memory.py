#!/usr/bin/env python3
from common import *  # noqa: F401,F403 (the shared helpers, imports and temp dir)
# r05: memory amplification from a tiny planted file. A ~800-byte Parquet file
# (one string column, dictionary-encoded, the dictionary holding one 16 MiB
# value of 'a' compressed by zstd, 100 rows all pointing at it) makes the
# server materialise every value: ~1.6 GB of string data per read, although
# DoGet sends 4 MiB messages. Two concurrent reads of this 1 KB file drive the
# server's RSS past 3 GB (--memory-limit auto is 256 MiB). Anyone who can
# drop a pyrosome file into the data directory (or an unlucky user with very
# repetitive long strings) can exhaust the server's memory.
# Exit 1 while the peak RSS passes 1 GiB.
import threading
bad = 0
p, c = start(int(os.environ.get("PORT", "19155")))
peak = [0]; done = [False]
def mon():
    while not done[0]:
        try:
            for l in open(f"/proc/{p.pid}/status"):
                if l.startswith("VmRSS"): peak[0] = max(peak[0], int(l.split()[1]) * 1024)
        except FileNotFoundError: break
        time.sleep(0.02)
try:
    big = "a" * (16 << 20)
    arr = pa.DictionaryArray.from_arrays(pa.array([0] * 100, pa.int32()), pa.array([big], pa.string()))
    data = parquet_bytes(pa.table({"s": arr}), compression="zstd", store_schema=False)
    print("file size:", len(data), "bytes; decoded values:", 100 * 16, "MiB")
    plant("r05/bomb", data)
    threading.Thread(target=mon, daemon=True).start()
    def reader():
        try:
            n = 0
            for ch in c.do_get(fl.Ticket(b"r05/bomb"), options=fl.FlightCallOptions(timeout=120)):
                n += ch.data.num_rows
        except Exception as e:
            print("read error:", str(e)[:120])
    ts = [threading.Thread(target=reader) for _ in range(2)]
    [t.start() for t in ts]; [t.join() for t in ts]
    done[0] = True
    print(f"peak server RSS during 2 concurrent reads: {peak[0] / 2**30:.2f} GiB; alive: {p.poll() is None}")
    bad = peak[0] > 2**30 or p.poll() is not None
finally:
    done[0] = True
    stop(p); shutil.rmtree(TMP, ignore_errors=True)
print("BUG PRESENT" if bad else "fixed")
sys.exit(1 if bad else 0)
