"""m04: profile keys that display identically in a listing are still different profiles:
canonically-equivalent spellings (NFC "café" vs NFD "cafe"+U+0301, precomposed Hangul "한" vs
conjoining jamo U+1112 U+1161 U+11AB) and a no-break space (U+00A0) or Braille blank (U+2800)
inside a key instead of a space.

What is wrong: round 28 (l04) closed invisible code points so that "two different names
[do not] look the same in a listing" (docs/protocol.md "Naming a profile"). Keys are still
compared byte by byte without Unicode normalization, and invisible-looking spacing
characters inside a key are accepted, so `quiver ls` / ListFlights show two rows that are
indistinguishable ("café" twice, "a b" twice) and a reader picking one by its displayed
name may read or write the other profile.

Promise contradicted: docs/protocol.md "Naming a profile": characters "which would make two
different names look the same in a listing" are refused.

Severity: LOW (confusable names; needs a writer choosing them; no data lost).

Exit 1 while the bug is present (any pair accepted as two profiles), 0 when fixed (one of
each pair refused, or both names the same profile).
"""
import json, os, shutil, signal, socket, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt29/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")

def put(c, path, ids):
    tbl = pa.table({"id": pa.array(ids, pa.int64())})
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path})), tbl.schema)
    w.write_table(tbl); w.done_writing(); r.read(); w.close()

PAIRS = [("k/caf\u00e9", "k/cafe\u0301"), ("k/\ud55c", "k/\u1112\u1161\u11ab"),
         ("k/a b", "k/a\u00a0b"), ("k/x y", "k/x\u2800y")]

def main():
    base = tempfile.mkdtemp(prefix="rt29-m04-", dir="/tmp")
    d = os.path.join(base, "data"); port = free_port()
    p = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", d],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        if b"serving" not in p.stdout.readline():
            raise SystemExit("server did not start")
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        bug = False
        for a, b in PAIRS:
            ok = []
            for i, k in enumerate((a, b)):
                try:
                    put(c, k, [i]); ok.append(True)
                except Exception as e:
                    ok.append(False); print("  refused:", ascii(k), str(e).split("gRPC client debug")[0][:120])
            if all(ok):
                ra = c.do_get(fl.Ticket(a.encode())).read_all().column("id").to_pylist()
                rb = c.do_get(fl.Ticket(b.encode())).read_all().column("id").to_pylist()
                two = ra != rb
                print(f"{a!s:10} | {b!s:10} -> two profiles: {two} ({ascii(a)} rows {ra}, {ascii(b)} rows {rb})")
                bug |= two
        listing = [b"/".join(f.descriptor.path).decode() for f in c.list_flights(b"k")]
        print("listing:", listing)
        if bug:
            print("BUG: names that display identically are different profiles")
            return 1
        print("OK"); return 0
    finally:
        p.send_signal(signal.SIGTERM)
        try: p.wait(20)
        except subprocess.TimeoutExpired: p.kill(); p.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
