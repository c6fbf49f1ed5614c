"""l04: profile keys may still hold invisible characters that are not of category Cf,
so two different profiles display as the same name in a listing.

What is wrong: the key check refuses format characters (Cf), bidi controls, C1 controls
and U+2028/U+2029, but accepts other characters that render as nothing:
  * U+034F COMBINING GRAPHEME JOINER (Mn, default-ignorable),
  * U+FE00..U+FE0F / U+E0100.. VARIATION SELECTORS after a plain letter (Mn, invisible),
  * U+180B..U+180D MONGOLIAN FREE VARIATION SELECTORS (Mn, default-ignorable),
  * U+3164 HANGUL FILLER / U+FFA0 HALFWIDTH HANGUL FILLER (Lo, default-ignorable, blank).
So `sales/orders` and `sales/orders<U+034F>` (or `…<U+FE0F>`) are two profiles that list
identically; a key of one U+3164 is a blank name. All of these are Unicode
Default_Ignorable_Code_Point characters, i.e. exactly "invisible characters".

Doc promise contradicted: docs/protocol.md "Naming a profile": keys may not hold
"... or other invisible characters: the format characters (category Cf: ...) ... which
would make two different names look the same in a listing. The error names the key
and the character (as a \\u escape)." (round 24's y03 fixed the Cf subset only.)

Severity: LOW (spoofable names in listings; no data is lost).

Exit 1 while the bug is present (any such key accepted), 0 when all are refused
with INVALID_ARGUMENT.
"""
import json, os, shutil, signal, socket, subprocess, sys, tempfile
import pyarrow as pa
import pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt28/quiver")


def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            s.close()
            return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")


def main():
    tmp = tempfile.mkdtemp(prefix="rt28-l04-", dir="/tmp")
    data = os.path.join(tmp, "data")
    port = free_port()
    proc = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    accepted = []
    try:
        assert b"serving" in proc.stdout.readline()
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        t = pa.table({"id": pa.array([1], pa.int64())})
        keys = ["orders", "orders\u034f", "orders\ufe0f", "orders\ufe00", "orders\U000e0100",
                "orders\u180b", "\u3164", "\uffa0"]
        for k in keys:
            try:
                w, r = c.do_put(fl.FlightDescriptor.for_path("sales", k), t.schema)
                w.write_table(t)
                w.done_writing()
                r.read()
                w.close()
                if k != "orders":
                    accepted.append(k)
                    print(f"accepted: sales/{k!a} (displays as 'sales/{k}')")
            except Exception as e:
                print(f"refused:  sales/{k!a}: {str(e).split('. gRPC')[0][:150]}")
        names = ["/".join(p.decode() for p in fi.descriptor.path) for fi in c.list_flights(b"")]
        print("listing as a user sees it:", names)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    if accepted:
        print(f"BUG: {len(accepted)} keys with invisible characters accepted")
        sys.exit(1)
    print("OK: invisible characters refused")
    sys.exit(0)


if __name__ == "__main__":
    main()
