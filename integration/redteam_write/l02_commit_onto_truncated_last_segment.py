"""l02: a running server commits new puts onto a commit log whose last segment was
truncated (emptied, or cut mid-line) under it, and answers a retry of the destroyed
record's request id from memory.

What is wrong: the last segment's record (an acknowledged append) is destroyed on disk
-- the segment file left in place but emptied / cut in half. A fresh server refuses
the profile (DATA_LOSS "corrupt file in the store (.../.log/<seg>)") and verify reports
chain_broken. The running server, however:
  * acknowledges a new put (a new segment chained onto the destroyed record, HEAD
    rewritten), and compact / remove-old-versions commit too;
  * answers a retry of the destroyed record's request id with the record that no
    longer exists on disk (status OK, "written nothing").
Its "two stats" check only notices a segment that is gone, not one whose records were
removed from it.

Doc promises contradicted:
 - docs/operations.md "Locks, crashes and recovery": a profile whose commit log is
   broken is refused, "its reads and its commits answer DATA_LOSS ... and nothing is
   committed onto it, so the evidence stays as it was found."
 - docs/format.md "The hash chain": the running server checks "before each commit
   cycle and before it answers a retried request id from its view of the log" so that
   no retry is "answered from its memory" and no "commit replace[s] the HEAD that tells
   of the loss". A truncated segment is a record removed (format.md: a log whose last
   records were deleted; a segment with a damaged line is chain_broken and readers
   refuse it).

Severity: LOW-MEDIUM (the client's new put is acknowledged, then unreadable on any fresh
server until the operator restores the segment; the retry is told "committed" from a
record that is no longer on storage).

Exit 1 while the bug is present, 0 when fixed.
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


def put(c, path, table, **kw):
    cmd = dict(path=path, **kw)
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
    w.write_table(table)
    w.done_writing()
    b = r.read()
    w.close()
    return json.loads(b.to_pybytes())


def short(e):
    return f"{type(e).__name__}: " + str(e).split(". gRPC")[0][:170]


def run_case(how):
    tmp = tempfile.mkdtemp(prefix="rt28-l02-", dir="/tmp")
    data = os.path.join(tmp, "data")
    port = free_port()
    proc = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    bad = []
    try:
        line = proc.stdout.readline()
        assert b"serving" in line, line
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        t = lambda i: pa.table({"id": pa.array([i] * 3, pa.int64())})
        for i in range(3):
            last = put(c, "a/p", t(i), request_id=f"r{i}")
        logd = os.path.join(data, "a", "p", ".log")
        seg = os.path.join(logd, "%020d.ndjson" % last["seq"])
        body = open(seg, "rb").read()
        with open(seg, "wb") as f:     # the record of the acknowledged put r2 is destroyed
            f.write(b"" if how == "emptied" else body[: len(body) // 2])
        before = set(os.listdir(logd))
        try:
            res = put(c, "a/p", t(2), request_id="r2")
            bad.append(f"retry of r2 answered OK from memory (seq {res['seq']}) though its record is gone")
        except Exception as e:
            print(f"  [{how}] retry r2 ->", short(e))
        try:
            res = put(c, "a/p", t(50), request_id="new")
            bad.append(f"new put acknowledged as seq {res['seq']} onto the broken log")
        except Exception as e:
            print(f"  [{how}] new put ->", short(e))
        new = sorted(set(os.listdir(logd)) - before)
        if new:
            bad.append(f"new segments written: {new}")
        # what a fresh server says about the profile now
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        proc = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert b"serving" in proc.stdout.readline()
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        try:
            n = c.do_get(fl.Ticket(b"a/p")).read_all().num_rows
            print(f"  [{how}] fresh server read: {n} rows")
        except Exception as e:
            print(f"  [{how}] fresh server read ->", short(e))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    for b in bad:
        print(f"  [{how}] BUG: {b}")
    return bad


def main():
    bad = run_case("emptied") + run_case("cut mid-line")
    if bad:
        sys.exit(1)
    print("OK: the running server refused the truncated log")
    sys.exit(0)


if __name__ == "__main__":
    main()
