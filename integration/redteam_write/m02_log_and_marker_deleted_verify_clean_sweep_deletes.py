"""m02: a profile whose .log and .quiver.kind were deleted is refused DATA_LOSS by reads,
yet `verify` reports it clean (0 files, no problems) and `sweep` deletes all of its data.

What is wrong: after `.log/` and the profile's `.quiver.kind` marker are removed from a Quiver
profile (manifest.json -> v0, v0/.version.json and the data files stay), a server answers
reads `DATA_LOSS` ("the manifest names v0, which has no commit record ... run verify"), but
`quiver verify` (online and offline) says "ok: 0 files checked, no problems", and
`sweep --older-than 0s` (here: the offline command; the online action does the same) removes
every data file of the manifest's version as an orphan, after which verify is still clean.
(With `.quiver.kind` left in place the same deletion is reported chain_broken and sweep
skips the profile, as documented.)

Promises contradicted: docs/format.md "Sweep": it "touches nothing in a profile whose chain
is broken" and never removes what it cannot classify; docs/protocol.md "Errors": DataLoss is
"a manifest naming an uncommitted version ... Run `verify`", and docs/format.md
"Verification" lists `missing` for "the manifest of a profile whose log holds its versions"
and `mutated` for ".version.json that is not the one its write record vouches for" -- a
server-refused profile is not reported at all. A manifest naming a Quiver version
(`.version.json` present) is evidence that Quiver committed it.

Severity: MEDIUM (the audit tool is silent about a profile the server refuses as tampered,
and the routine cleanup then destroys all of its rows).

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

def main():
    base = tempfile.mkdtemp(prefix="rt29-m02-", dir="/tmp")
    d = os.path.join(base, "data"); port = free_port(); p = None
    bug = False
    try:
        p, c = start(d, port)
        put(c, "a/p", pa.table({"id": pa.array([1, 2, 3], pa.int64())}), mode="write")
        put(c, "a/p", pa.table({"id": pa.array([4, 5], pa.int64())}))
        stop(p); p = None
        files = sorted(f for f in os.listdir(os.path.join(d, "a/p/v0")) if f.endswith(".parquet"))
        shutil.rmtree(os.path.join(d, "a/p/.log"))
        os.remove(os.path.join(d, "a/p/.quiver.kind"))
        p, c = start(d, port)
        try:
            c.do_get(fl.Ticket(b"a/p")).read_all(); read = "OK"
        except Exception as e:
            read = str(e).split("gRPC client debug")[0]
        stop(p); p = None
        print("read on a fresh server:", read)
        v = subprocess.run([Q, "verify", "--data-dir", d], capture_output=True, text=True)
        print("verify exit", v.returncode, ":", (v.stdout + v.stderr).strip()[-300:])
        if "data loss" in read.lower() and v.returncode == 0:
            print("BUG: reads refuse the profile as DATA_LOSS but verify reports nothing"); bug = True
        sw = subprocess.run([Q, "sweep", "--data-dir", d, "--older-than", "0s"], capture_output=True, text=True)
        print("sweep:", (sw.stdout + sw.stderr).strip()[-300:])
        left = [f for f in files if os.path.exists(os.path.join(d, "a/p/v0", f))]
        print("data files before:", files, "after sweep:", left)
        if left != files:
            print("BUG: sweep deleted the data files of the version the manifest names"); bug = True
        if not bug:
            print("OK")
        return 1 if bug else 0
    finally:
        if p is not None:
            p.kill(); p.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
