"""l01: remove-old-versions commits a `retire` record (and deletes a version) onto a
commit log whose last segment was deleted under the running server.

What is wrong: after the segment of the profile's last record is deleted under a
running server, puts and `compact` are correctly refused with DATA_LOSS ("the
commit log's last segment ... is gone ... nothing was committed"), but the
`remove-old-versions` action (grace_s 0) still succeeds: it appends a new segment
(a `retire` record chained onto the missing record), rewrites HEAD, and deletes the
retired version's directory.

Doc promises contradicted:
 - docs/operations.md "Locks, crashes and recovery": a profile whose commit log is
   broken -- "a segment deleted under a running server -- is refused: its reads and
   its commits answer DATA_LOSS ... and nothing is committed onto it, so the evidence
   stays as it was found."
 - docs/format.md "The hash chain": a running server checks before each commit cycle
   that the segment of the last record it knows is still there, so that no "commit
   replace the HEAD that tells of the loss".
 - docs/format.md "Retention": retire records are commits in the log.

Severity: MEDIUM (a state-changing, data-deleting commit on a log the server itself
knows to be broken; the HEAD that recorded the loss is overwritten).

Exit 1 while the bug is present, 0 when fixed.
"""
import json, os, shutil, signal, socket, subprocess, sys, tempfile, time
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


def put(c, path, table, **kw):
    cmd = dict(path=path, **kw)
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
    w.write_table(table)
    w.done_writing()
    b = r.read()
    w.close()
    return json.loads(b.to_pybytes())


def act(c, name, body):
    return [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action(name, json.dumps(body).encode()))]


def main():
    tmp = tempfile.mkdtemp(prefix="rt28-l01-", dir="/tmp")
    data = os.path.join(tmp, "data")
    port = free_port()
    proc = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    bug = False
    try:
        line = proc.stdout.readline()
        assert b"serving" in line, line
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        t = lambda i: pa.table({"id": pa.array([i] * 3, pa.int64())})
        for i in range(2):
            put(c, "a/p", t(i), request_id=f"r{i}")        # v0
        put(c, "a/p", t(10), mode="write")                  # v1
        last = put(c, "a/p", t(11), request_id="r-last")    # acknowledged append: the last record
        logd = os.path.join(data, "a", "p", ".log")
        seg = os.path.join(logd, "%020d.ndjson" % last["seq"])
        os.remove(seg)                                      # the last segment deleted under the server
        before = sorted(os.listdir(logd))
        v0_before = os.path.isdir(os.path.join(data, "a", "p", "v0"))

        try:
            put(c, "a/p", t(99), request_id="new")
            print("put: committed (unexpected)")
        except Exception as e:
            print("put:", type(e).__name__, str(e).split(". gRPC")[0][:160])
        try:
            act(c, "compact", {"path": "a/p"})
            print("compact: committed (unexpected)")
        except Exception as e:
            print("compact:", type(e).__name__, str(e).split(". gRPC")[0][:160])
        try:
            res = act(c, "remove-old-versions", {"path": "a/p", "grace_s": 0})
            print("remove-old-versions: OK", res)
            ok = True
        except Exception as e:
            print("remove-old-versions:", type(e).__name__, str(e).split(". gRPC")[0][:160])
            ok = False
        after = sorted(os.listdir(logd))
        new_segs = sorted(set(after) - set(before))
        v0_after = os.path.isdir(os.path.join(data, "a", "p", "v0"))
        print("log before:", before)
        print("log after: ", after)
        print("new segments written onto the broken log:", new_segs)
        print("v0 directory present before/after:", v0_before, v0_after)
        if ok or new_segs or (v0_before and not v0_after):
            bug = True
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    if bug:
        print("BUG: a commit (retire) was made onto a log whose last segment is gone")
        sys.exit(1)
    print("OK: retention refused on the broken log")
    sys.exit(0)


if __name__ == "__main__":
    main()
