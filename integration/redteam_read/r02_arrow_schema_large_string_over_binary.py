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
# r02: the footer's ARROW:schema check lets `large_string` through over a plain
# BYTE_ARRAY (binary, no String/UTF8 annotation) column. Quiver then serves
# bytes that are not UTF-8 as large_string (an invalid Arrow array: a pyarrow
# client's to_pylist()/validate(full=True) fail). pyarrow reading the same file
# keeps the Parquet type (binary). The same check refuses `string` correctly
# (that case is served as binary), so only the large variant slips through.
# Also the reverse: a String column whose ARROW:schema claims large_binary is
# served as large_binary (pyarrow: string).
# Kept as a test (integration/test_redteam_read.py): served data must be valid
# Arrow, or the read refused as corrupt (what Quiver does now).
# Exit 1 while the bug is present.
bad = 0
p, c = start(int(os.environ.get("PORT", "19151")))
try:
    raw = parquet_bytes(pa.table({"x": pa.array([b"ok", b"\xff\xfe not utf8", None, b"\xc3"], pa.binary())}))
    for claimed in [pa.string(), pa.large_string()]:
        sch = base64.b64encode(pa.schema([pa.field("x", claimed)]).serialize().to_pybytes())
        data = set_kv(raw, b"ARROW:schema", sch)
        key = f"r02/bin_as_{claimed}"
        plant(key, data)
        ref_type = pq.read_table(os.path.join(DATA, key, "v0", "0.parquet")).schema.field("x").type
        # Served, it must be valid Arrow; or refused as corrupt (the
        # file's Arrow schema calls bytes that are not UTF-8 a string).
        try:
            got = doget(c, key)
        except fl.FlightError as e:
            refused = "data loss" in str(e).lower() and "corrupt" in str(e)
            print(f"binary column, ARROW:schema says {claimed}: refused ({'DATA_LOSS' if refused else e})")
            bad += not refused
            continue
        typ = got.schema.field("x").type
        try:
            got.validate(full=True); valid = True
        except pa.ArrowInvalid as e:
            valid = False
        print(f"binary column, ARROW:schema says {claimed}: quiver serves {typ} (valid={valid}); pyarrow reads {ref_type}")
        if not valid:
            bad += 1
    raw = parquet_bytes(pa.table({"x": pa.array(["a", "bc", None], pa.string())}))
    data = set_kv(raw, b"ARROW:schema", base64.b64encode(pa.schema([pa.field("x", pa.large_binary())]).serialize().to_pybytes()))
    plant("r02/str_as_lbin", data)
    got = doget(c, "r02/str_as_lbin")
    ref_type = pq.read_table(os.path.join(DATA, "r02/str_as_lbin", "v0", "0.parquet")).schema.field("x").type
    # Valid either way (Quiver keeps the stored Arrow type): only printed.
    print(f"string column, ARROW:schema says large_binary: quiver serves {got.schema.field('x').type}; pyarrow reads {ref_type}")
    got.validate(full=True)
finally:
    stop(p); shutil.rmtree(TMP, ignore_errors=True)
print("BUG PRESENT" if bad else "fixed")
sys.exit(1 if bad else 0)
