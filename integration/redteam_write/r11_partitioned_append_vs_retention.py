"""r11: a running partitioned append loses its files to retention of the version it targets.

What is wrong: an append streaming into a partitioned version v0 while a write commits v1
and `remove-old-versions` (keep=1, grace_s=0) retires v0 fails at its end with UNAVAILABLE
("a file it was writing was removed meanwhile ... sync dir p/v0: no such file"): retention
deleted the whole v0 directory, including the running put's young partition files. The same
race against an UNPARTITIONED version keeps the running put's temp and the append is
re-targeted into v1 and acknowledged.

Promise contradicted: format.md "Sweep" / brief of this binary: "What is left of a retired
version goes at any age ...; only young files Quiver wrote (a running put's) wait for the age";
format.md "The commit point is linearizable": an append whose version is no longer the latest
is re-targeted to the latest version. Here it is not re-targeted but fails.

Severity: LOW (the put fails retryably; no acknowledged row is lost).
Exit 1 while the partitioned append fails (or its rows are not read exactly once), 0 when fixed.
"""
import os, sys, json, time, shutil, socket, subprocess, tempfile, signal
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt34/quiver")


def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port")


def tbl(ids):
    return pa.table({"id": pa.array(ids, pa.int64()), "s": pa.array([f"r{i}" for i in ids])})


def main():
    d = tempfile.mkdtemp(prefix="rt34-r11-", dir="/tmp")
    port = free_port()
    p = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", d],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    bad = False
    try:
        line = p.stdout.readline()
        assert b"serving" in line, line
        c = fl.FlightClient(f"grpc://127.0.0.1:{port}")

        def put(t, **cmd):
            w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(dict(path="p", **cmd))), t.schema)
            w.write_table(t); w.done_writing(); r.read(); w.close()

        put(tbl([1, 2, 3]), mode="write", partition_by=["s"])            # v0, partitioned
        t = tbl([100, 101])
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "p", "mode": "append"})), t.schema)
        w.write_table(t)                                                # append streaming into v0
        time.sleep(0.5)
        put(tbl([4, 5]), mode="write", partition_by=["s"])              # v1
        gc = list(c.do_action(fl.Action("remove-old-versions",
                                        json.dumps({"path": "p", "keep": 1, "grace_s": 0}).encode())))
        print("retention:", [json.loads(x.body.to_pybytes()) for x in gc])
        w.write_table(tbl([102]))
        w.done_writing()
        acked = False
        try:
            r.read(); w.close(); acked = True
        except Exception as e:
            print("append failed:", str(e).split(". gRPC client debug")[0])
        ids = sorted(c.do_get(fl.Ticket(b'{"path":"p"}')).read_all().column("id").to_pylist())
        print("append acknowledged:", acked, "rows read:", ids)
        if not acked:
            bad = True
        elif any(ids.count(x) != 1 for x in (100, 101, 102)):
            print("acknowledged rows not read exactly once"); bad = True
    finally:
        p.send_signal(signal.SIGKILL); p.wait()
        shutil.rmtree(d, ignore_errors=True)
    print("BUG present" if bad else "OK")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
