"""l03: a commit-log segment replaced by a symbolic link is answered INVALID_ARGUMENT
("the profile's path passes through a symbolic link ...") instead of DATA_LOSS.

What is wrong: an operator/attacker replaces one segment of a profile's `.log/` by a
symbolic link (here to a byte-identical copy inside the same `.log/`). A fresh server
then answers every read and put of the profile with INVALID_ARGUMENT, telling the
client that *its profile path* passes through a link -- the client's request ("a/p")
is fine; the committed metadata on storage was altered. A committed data file replaced
the same way is (correctly) DATA_LOSS "committed file ... was replaced by a symbolic
link". Clients and alerting that key on DATA_LOSS ("run verify") miss the tampering,
and a client is told to fix a request that is not wrong.

Doc promises contradicted:
 - docs/protocol.md "Errors": DataLoss is "committed data or metadata lost or altered
   on the storage: ... replaced by a link ...; a commit log truncated, corrupt ...";
   InvalidArgument is for what the client got wrong (bad keys, malformed requests).
 - docs/operations.md "Locks, crashes and recovery": a broken commit log is refused
   with DATA_LOSS naming the segment ("the log was altered; run verify").

Severity: LOW (refused either way; wrong status code and a misleading message).

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


def start(data, port):
    p = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert b"serving" in p.stdout.readline()
    return p


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def put(c, path, table):
    w, r = c.do_put(fl.FlightDescriptor.for_path(*path.split("/")), table.schema)
    w.write_table(table)
    w.done_writing()
    b = r.read()
    w.close()
    return json.loads(b.to_pybytes())


def main():
    tmp = tempfile.mkdtemp(prefix="rt28-l03-", dir="/tmp")
    data = os.path.join(tmp, "data")
    port = free_port()
    p = start(data, port)
    codes = {}
    try:
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        t = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
        for _ in range(3):
            put(c, "a/p", t)
        stop(p)
        logd = os.path.join(data, "a", "p", ".log")
        seg = os.path.join(logd, "%020d.ndjson" % 2)
        shutil.copy(seg, os.path.join(logd, ".seg2-copy"))
        os.remove(seg)
        os.symlink(".seg2-copy", seg)
        p = start(data, port)
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        for name, fn in [("DoGet", lambda: c.do_get(fl.Ticket(b"a/p")).read_all()),
                         ("DoPut", lambda: put(c, "a/p", t)),
                         ("list-versions", lambda: list(c.do_action(fl.Action("list-versions", b'{"path":"a/p"}'))))]:
            try:
                fn()
                codes[name] = "OK"
            except fl.FlightError as e:
                msg = str(e)
                code = "DATA_LOSS" if "data loss" in msg.lower() else ("INVALID_ARGUMENT" if "invalid argument" in msg.lower() else type(e).__name__)
                codes[name] = code
                print(f"{name}: {code}: {msg.split('. gRPC')[0][:200]}")
            except Exception as e:
                codes[name] = type(e).__name__
                print(f"{name}: {type(e).__name__}: {str(e)[:200]}")
    finally:
        stop(p)
        shutil.rmtree(tmp, ignore_errors=True)
    if any(v != "DATA_LOSS" for v in codes.values()):
        print("BUG: a symlinked log segment is not reported as DATA_LOSS:", codes)
        sys.exit(1)
    print("OK: DATA_LOSS for a symlinked segment")
    sys.exit(0)


if __name__ == "__main__":
    main()
