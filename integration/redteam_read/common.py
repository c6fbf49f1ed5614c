"""Helpers the read-path red team reproducers share: a server on a temp data
dir, planting files as pyrosome would, and footer surgery."""
import base64, json, os, shutil, subprocess, sys, tempfile, time
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", "quiver")
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
