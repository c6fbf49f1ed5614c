"""m03: a version directory, its .version.json or the profile's manifest.json replaced by a
symbolic link (to an identical copy) is answered INVALID_ARGUMENT "the profile's path passes
through a symbolic link", not DATA_LOSS -- the round-28 fix (l03) covered only the log.

What is wrong: the profile's own directory is reachable without a link; the request names it
correctly. A committed version directory / .version.json / manifest replaced by a link is
storage altered, like a segment or a data file replaced by a link (both DATA_LOSS). Instead
reads, list-versions and puts answer INVALID_ARGUMENT, telling the client its request was
wrong (and the message claims the profile's *path* passes through a link, which it does
not). For comparison the script also shows that deleting .version.json is DATA_LOSS.

Promises contradicted: docs/protocol.md "Errors": DataLoss is "committed data or metadata
lost or altered on the storage: a committed file ... replaced by a link, directory or special
file"; docs/format.md "Symbolic links": only "a profile path through one is InvalidArgument";
docs/format.md "The hash chain" / reliability round 28 l03 (a link is storage altered:
DATA_LOSS "when the profile's own directory is reachable without one").

Severity: LOW (wrong status code and misleading message; nothing is followed or lost).

Exit 1 while the bug is present, 0 when fixed.
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

def start(d, port):
    p = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", d],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline()
    if b"serving" not in line:
        p.kill(); raise SystemExit(f"server did not start: {line!r}")
    return p, fl.connect(f"grpc://127.0.0.1:{port}")

def stop(p):
    p.send_signal(signal.SIGTERM)
    try: p.wait(20)
    except subprocess.TimeoutExpired: p.kill(); p.wait()

def put(c, path, tbl, **kw):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, **kw})), tbl.schema)
    w.write_table(tbl); w.done_writing(); r.read(); w.close()

def code(f):
    try:
        f(); return "OK", ""
    except Exception as e:
        m = str(e).split("gRPC client debug")[0]
        for k, v in (("data loss", "DATA_LOSS"), ("invalid argument", "INVALID_ARGUMENT"), ("not found", "NOT_FOUND")):
            if k in m.lower(): return v, m
        return type(e).__name__, m

def main():
    base = tempfile.mkdtemp(prefix="rt29-m03-", dir="/tmp")
    d = os.path.join(base, "data"); port = free_port(); p = None
    cases = {"vdir": "v0", "vjson": "v0/.version.json", "manifest": "manifest.json", "deleted_vjson": "v0/.version.json"}
    try:
        p, c = start(d, port)
        for k in cases:
            put(c, "x/" + k, pa.table({"id": pa.array([1, 2, 3], pa.int64())}), mode="write")
            put(c, "x/" + k, pa.table({"id": pa.array([4], pa.int64())}))
        stop(p); p = None
        outside = os.path.join(base, "copies"); os.mkdir(outside)
        for k, rel in cases.items():
            t = os.path.join(d, "x", k, rel); cp = os.path.join(outside, k)
            if k == "deleted_vjson":
                os.remove(t); continue
            if os.path.isdir(t):
                shutil.copytree(t, cp); shutil.rmtree(t)
            else:
                shutil.copy2(t, cp); os.remove(t)
            os.symlink(cp, t)
        p, c = start(d, port)
        bug = False
        for k in cases:
            n = "x/" + k
            r_get = code(lambda: c.do_get(fl.Ticket(n.encode())).read_all())
            r_put = code(lambda: put(c, n, pa.table({"id": pa.array([9], pa.int64())})))
            print(f"{k:14} get: {r_get[0]:16} put: {r_put[0]:16} {r_get[1][:150]}")
            if k != "deleted_vjson" and (r_get[0] != "DATA_LOSS" or r_put[0] != "DATA_LOSS"):
                bug = True
            if base in r_get[1] or base in r_put[1]:
                print("  (a server path leaks)"); bug = True
        stop(p); p = None
        if bug:
            print("BUG: a link in place of committed metadata of an unlinked profile is not DATA_LOSS")
            return 1
        print("OK")
        return 0
    finally:
        if p is not None:
            p.kill(); p.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
