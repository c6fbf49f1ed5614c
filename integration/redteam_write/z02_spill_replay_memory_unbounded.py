"""z02: a spilled partitioned write loads a partition's whole remainder into memory at the end: RSS grows
without bound with the bytes (not rows) of a partition.

What is wrong: the spill encodes a partition's rows as a row group only each time 32 Ki ROWS have
come; rows that never reach that count (here 200 rows of 1 MB each = 191 MiB of Arrow data, all in
one partition) stay in the spill file and are encoded after the client has sent everything. That
replay holds them all in memory, several times over: peak RSS ~1.1 GB for a 191 MiB put
(measured: 143 MiB -> 877 MB, 381 MiB -> 2,090 MB; 286 MiB of 10 KB rows -> 643 MB; i.e. about
5x the partition's bytes), while the same put with `--spill-dir off` peaks at ~270-286 MB whatever
its size. A single client can therefore make the server allocate any amount of memory (a 1 GiB
put of 1 MB rows -> ~5.5 GB) and get it OOM-killed, from default flags, well inside
--max-recv-msg-size (each batch here is 16 MB).

Promise contradicted: operations.md `--memory-limit` "auto ... (a 1 GiB put, one file or 64 partitions,
peaks at about 280 MiB RSS)", `--put-memory` "memory all puts' Parquet writers may hold together ...
never an error"; operations.md Limits "No request may crash the server or starve the others";
the spill's purpose (reliability.md "Puts into many small partitions": memory bounded).
Severity: HIGH (unbounded server memory from one ordinary, valid put; OOM / DoS).

Exit 1 while the bug is present (peak RSS > 600 MB), 0 when fixed.
"""
import json, os, pathlib, shutil, signal, socket, subprocess, sys, tempfile, threading, time
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", str(pathlib.Path(__file__).resolve().parents[2] / "bin" / "quiver"))
LIMIT_MB = 600


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


def rss_mb(pid):
    try:
        for l in open(f"/proc/{pid}/status"):
            if l.startswith("VmRSS"):
                return int(l.split()[1]) // 1024
    except OSError:
        pass
    return 0


def main():
    data = tempfile.mkdtemp(prefix="rt25-z02-", dir="/tmp")
    port = free_port()
    srv = subprocess.Popen(["nice", "-n", "15", Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = srv.stdout.readline()
        if b"serving" not in line:
            raise SystemExit(f"server did not start: {line!r}")
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        peak = [0]; stop = [False]

        def mon():
            while not stop[0]:
                peak[0] = max(peak[0], rss_mb(srv.pid)); time.sleep(0.02)
        th = threading.Thread(target=mon); th.start()
        rowsz, nrows, per = 1_000_000, 200, 16
        blob = os.urandom(rowsz * 2)
        schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("b", pa.binary())])
        cmd = {"path": "mem/x", "mode": "write", "partition_by": ["p"]}
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), schema)
        for start in range(0, nrows, per):
            ids = list(range(start, min(nrows, start + per)))
            w.write_batch(pa.record_batch({"id": pa.array(ids, pa.int64()), "p": pa.array(["one"] * len(ids)),
                                           "b": pa.array([blob[i * 997 % rowsz:][:rowsz] for i in ids], pa.binary())}))
        w.done_writing()
        res = json.loads(r.read().to_pybytes()); w.close()
        time.sleep(0.3)
        stop[0] = True; th.join()
        print(f"put acknowledged: {res['rows']} rows, {len(res['files'])} file(s); "
              f"Arrow data sent: {rowsz * nrows >> 20} MiB in batches of {per} rows")
        print(f"server peak RSS during the put: {peak[0]} MB (limit for this check: {LIMIT_MB} MB; "
              f"docs: a 1 GiB put peaks at about 280 MiB; --spill-dir off: ~280 MB)")
        if peak[0] > LIMIT_MB:
            print("BUG: the spill's replay holds the partition's rows in memory; RSS grows with the put's bytes")
            return 1
        print("OK: memory bounded")
        return 0
    finally:
        if srv.poll() is None:
            srv.kill(); srv.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
