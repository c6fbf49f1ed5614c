#!/usr/bin/env python3
from common import *  # noqa: F401,F403 (the shared helpers, imports and temp dir)
# r07: a corrupt page in a string column (here: the RLE/bit-packed dictionary
# index run of a data page claims bit width 33, or an index past the
# dictionary) in a pyrosome (unrecorded) file is answered INTERNAL "internal
# error (see server log)", while the same corruption in a file Quiver wrote
# (DoPut) is DATA_LOSS "committed data lost or altered", and a footer
# corruption of the pyrosome file is DATA_LOSS "corrupt file in the store (...); run the verify action",
# the code docs/protocol.md gives for "committed data ... altered on the
# storage". The client cannot tell a corrupt file from a server bug.
# Exit 1 while the status is INTERNAL.
import glob
def skip_struct(b, i):
    """skip a thrift compact struct starting at i; return the index after it"""
    last = 0
    while True:
        h = b[i]; i += 1
        if h == 0: return i
        t = h & 0x0f
        if h >> 4 == 0: _, i = read_varint(b, i)   # long form field id
        i = skip_val(b, i, t)
def skip_val(b, i, t):
    if t in (1, 2): return i
    if t == 3: return i + 1
    if t in (4, 5, 6): _, i = read_varint(b, i); return i
    if t == 7: return i + 8
    if t == 8: n, i = read_varint(b, i); return i + n
    if t in (9, 10):
        h = b[i]; i += 1; n = h >> 4; et = h & 0x0f
        if n == 15: n, i = read_varint(b, i)
        for _ in range(n): i = skip_val(b, i, et)
        return i
    if t == 12: return skip_struct(b, i)
    raise ValueError(t)
def corrupt_index_page(data, fn, bitwidth):
    md = pq.ParquetFile(fn).metadata.row_group(0).column(0)
    assert md.has_dictionary_page and md.compression == "UNCOMPRESSED", md
    off = md.data_page_offset
    payload = skip_struct(data, off)        # required column, v1 page: payload starts with the bit width
    d = bytearray(data); d[payload] = bitwidth
    return bytes(d)
bad = 0
p, c = start(int(os.environ.get("PORT", "19157")), "--compression", "none")
try:
    t = pa.table({"s": pa.array([f"k{i % 5}" for i in range(100)])}, schema=pa.schema([pa.field("s", pa.string(), nullable=False)]))
    raw = parquet_bytes(t, compression="none")
    fn = os.path.join(TMP, "w.parquet")
    for bw in (33, 7):
        plant(f"r07/pyro_bw{bw}", corrupt_index_page(raw, fn, bw))
    # the same corruption in a file Quiver wrote (uncompressed, so the byte can be found)
    p2 = p
    w, r = c.do_put(fl.FlightDescriptor.for_path("r07/put"), t.schema); w.write_table(t); w.done_writing(); r.read(); w.close()
    stop(p)
    qf = glob.glob(os.path.join(DATA, "r07", "put", "v*", "*.parquet"))[0]
    qdata = open(qf, "rb").read()
    os.chmod(qf, 0o644)
    newdata = corrupt_index_page(qdata, qf, 33)
    open(qf, "wb").write(newdata)
    p, c = start(int(os.environ.get("PORT", "19157")))
    res = {}
    for key in ["r07/pyro_bw33", "r07/pyro_bw7", "r07/put"]:
        try: doget(c, key); res[key] = "OK (?)"
        except fl.FlightError as e: res[key] = type(e).__name__ + ": " + str(e).split(". gRPC")[0]
    # for comparison: a footer corruption of the same file
    d = bytearray(raw); k = d.rfind(b"\x18\x01s%\x00L\x1c"); d[k + 7] = 0x9c
    plant("r07/pyro_footer", bytes(d))
    try: doget(c, "r07/pyro_footer")
    except fl.FlightError as e: res["r07/pyro_footer (comparison)"] = type(e).__name__ + ": " + str(e).split(". gRPC")[0]
    for k, v in res.items(): print(k, "->", v)
    bad = sum("internal error" in v for v in res.values())
finally:
    stop(p); shutil.rmtree(TMP, ignore_errors=True)
print("BUG PRESENT" if bad else "fixed")
sys.exit(1 if bad else 0)
