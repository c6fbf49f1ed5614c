"""m01: sweep on a running server deletes the data file of an acknowledged put whose
last log segment (and HEAD) were deleted under it -- and leaves a data dir that verifies clean.

What is wrong: a server that has read a profile's log (its view holds records 1 and 2) is
asked to `sweep {"older_than_s": 0}` after the log's last segment (record 2, an acknowledged
append) and .log/HEAD were deleted on disk. Every other mutating path of a running server
(commit cycles, retried request ids, retention, retired-version removal, manifest repair,
set-schema-policy) first checks that the segment of the last record it knows is still there
and refuses DATA_LOSS. Sweep does not: it classifies the acknowledged append's file
(v0/1.parquet) as an orphan and removes it. Afterwards the rows are gone and `quiver verify`
reports NOTHING: the evidence of the tampering is erased by the server itself.

Promises contradicted: docs/operations.md "Locks, crashes and recovery" (a profile whose
log's last segment was deleted under a running server is refused ... "so the evidence stays
as it was found"); docs/format.md "The hash chain" (a running server checks the last
segment it knows before it changes anything); the round-29 brief's "every acknowledged
put's rows readable exactly once". Sweep "never removes a file a record lists".

Severity: MEDIUM (acknowledged rows destroyed and the tampering made undetectable; needs
someone who already altered the log, which is what the check exists for).

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
    base = tempfile.mkdtemp(prefix="rt29-m01-", dir="/tmp")
    d = os.path.join(base, "data"); port = free_port(); p = None
    try:
        # 1. a server writes the profile: a write (record 1) and a large append (record 2, own file)
        p, c = start(d, port)
        put(c, "a/p", pa.table({"id": pa.array([1, 2, 3], pa.int64())}), mode="write")
        put(c, "a/p", pa.table({"id": pa.array(range(100, 2_000_100), pa.int64())}))
        stop(p)
        # 2. another server (not writing to it) reads the profile: its view holds both records
        p, c = start(d, port)
        before = c.do_get(fl.Ticket(b"a/p")).read_all().num_rows
        print("rows before:", before)
        # 3. tamper: delete the last segment and HEAD under the running server
        lg = os.path.join(d, "a/p/.log")
        segs = sorted(x for x in os.listdir(lg) if x.endswith(".ndjson"))
        os.remove(os.path.join(lg, segs[-1])); os.remove(os.path.join(lg, "HEAD"))
        # 4. sweep through that server
        res = [json.loads(r.body.to_pybytes()) for r in
               c.do_action(fl.Action("sweep", json.dumps({"older_than_s": 0}).encode()))]
        print("sweep result:", res)
        stop(p); p = None
        gone = not os.path.exists(os.path.join(d, "a/p/v0/1.parquet"))
        v = subprocess.run([Q, "verify", "--data-dir", d], capture_output=True, text=True)
        print("file of the acknowledged append deleted:", gone)
        print("offline verify exit", v.returncode, ":", (v.stdout + v.stderr).strip()[-400:])
        if gone:
            print("BUG: sweep removed a committed file the server's view knows; verify exit", v.returncode)
            return 1
        print("OK: the file of the acknowledged append was kept")
        return 0
    finally:
        if p is not None:
            p.kill(); p.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
