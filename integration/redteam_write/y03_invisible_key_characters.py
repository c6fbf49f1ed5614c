#!/usr/bin/env python3
"""y03: profile keys may hold invisible format characters -- U+200B ZERO WIDTH SPACE, U+200C/D
(zero-width non-joiner/joiner), U+2060 WORD JOINER, U+FEFF ZERO WIDTH NO-BREAK SPACE (BOM), U+00AD
SOFT HYPHEN -- and the line/paragraph separators U+2028/U+2029. Each makes a second profile
whose name looks exactly like an existing one in a listing ("sales/orders" and
"sales/\\u200borders" both print as sales/orders), so a writer can be tricked into appending to, or
a reader into reading, a look-alike profile.

Contradicts protocol.md "Naming a profile": keys may not "hold C1 control characters (U+0080-U+009F)
or Unicode bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E/F, U+061C), which would
make two different names look the same in a listing" -- the refused set stops short of the other
invisible format (Cf) characters that do exactly that.
Exit 1 while such keys are accepted, 0 when they are refused INVALID_ARGUMENT."""
import os, sys, json, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", "/work/rtrun/rt24/quiver")

def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")

def put(c, path, table):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path}).encode()), table.schema)
    w.write_table(table); w.done_writing(); r.read(); w.close()

tmp = tempfile.mkdtemp(prefix="y03_"); port = free_port()
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", os.path.join(tmp, "d"),
                      "--log-level", "error"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
accepted = []
try:
    while b"serving" not in p.stdout.readline(): pass
    c = fl.connect(f"grpc://127.0.0.1:{port}")
    put(c, "sales/orders", pa.table({"x": [1]}))
    for ch in ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u2028", "\u2029"]:
        name = "sales/" + ch + "orders" if ch not in "\u2028\u2029" else "sales/ord" + ch + "ers"
        try:
            put(c, name, pa.table({"x": [666]})); accepted.append("U+%04X" % ord(ch))
        except pa.ArrowInvalid:
            pass  # INVALID_ARGUMENT (the original caught fl.FlightError, which pyarrow does not raise for it)
    print("accepted keys with:", accepted)
    listing = [fi.descriptor.path for fi in c.list_flights(b"sales")]
    print("ListFlights shows:", [("/".join(x.decode() for x in d)) for d in listing][:10])
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT: look-alike profile names accepted" if accepted else "OK: fixed")
sys.exit(1 if accepted else 0)
