"""n02: keys that list exactly alike are still accepted as different profiles,
through the emoji exceptions to the invisible-character rule.

What is wrong: protocol.md "Naming a profile" refuses default-ignorable characters
"which would make two different names look the same in a listing", and allows a
zero width joiner only "inside an emoji sequence (between two symbols, as in
👩‍💻), where it draws one emoji from two", and the presentation selector U+FE0F
only "right after a symbol ... (❤️, 1️⃣)" for the same reason. The exceptions are
applied to ANY symbol, also where the character draws nothing:
  * "🚀" and "🚀\uFE0F": U+1F680 is already emoji-presentation and has no
    variation sequence, so U+FE0F is invisible;
  * "🚀🚀" and "🚀\u200D🚀": no emoji ZWJ sequence exists for them, so the ZWJ
    draws nothing and both show as two rockets;
  * "©\u200D©" and "©©" likewise.
All are accepted as distinct profiles and ListFlights shows them as identical
strings. (Not cross-script homoglyphs, which the docs leave out: these differ only
by default-ignorable code points, the class round 28 l04 / round 29 m04 refuse.)
Severity: LOW.
Exit 1 while such pairs are accepted, 0 when at least one name of each pair is refused.
"""
import os, sys, json, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt30/quiver")

def freeport():
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")

PORT = int(os.environ.get("PORT") or freeport())
d = tempfile.mkdtemp(prefix="rt30-n02-", dir="/tmp")
p = subprocess.Popen(["nice", "-n", "10", Q, "serve", "--addr", f"127.0.0.1:{PORT}", "--data-dir", d],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
pairs = [("\U0001F680", "\U0001F680\uFE0F"),
         ("\U0001F680\U0001F680", "\U0001F680\u200D\U0001F680"),
         ("\u00A9\u00A9", "\u00A9\u200D\u00A9")]
bug = False
try:
    p.stdout.readline()
    c = fl.connect(f"grpc://127.0.0.1:{PORT}")
    t = pa.table({"id": [1]})
    def put(key):
        try:
            w, r = c.do_put(fl.FlightDescriptor.for_path(key, "p"), t.schema)
            w.write_table(t); w.done_writing(); r.read(); w.close()
            return True
        except fl.FlightError as e:
            return False
    for a, b in pairs:
        ra, rb = put(a), put(b)
        print(f"{ascii(a)} accepted={ra}   {ascii(b)} accepted={rb}   (display: {a!s} vs {b!s})")
        if ra and rb:
            bug = True
    print("listing:", [b"/".join(f.descriptor.path).decode() for f in c.list_flights(b"")])
finally:
    if p.poll() is None:
        p.terminate(); p.wait(30)
    shutil.rmtree(d, ignore_errors=True)
print("BUG PRESENT" if bug else "OK")
sys.exit(1 if bug else 0)
