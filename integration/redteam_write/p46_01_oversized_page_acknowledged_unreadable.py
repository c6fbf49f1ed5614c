#!/usr/bin/env python3
"""p46_01: a put whose string or binary values would make a Parquet page larger
than readers accept (256 MiB) was acknowledged, and then every read of the
profile failed DATA_LOSS ("uncompressed page size ... exceeds configured limit").
With --max-recv-msg-size raised to 300 MiB (the docs allow it): one value of
256 MiB + 4 KiB, or 1,024 values of 260 KiB in one batch.
Expected: refused INVALID_ARGUMENT at put time, naming the column, and nothing
committed (a small put before it still reads back); or read back byte for byte.
Exit 1 while such a put is acknowledged and unreadable, or refused any other way.
usage: p46_01_oversized_page_acknowledged_unreadable.py /path/to/quiver"""
import hashlib, json, os, shutil, socket, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.flight as fl


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def put(client, path, batch):
    w, r = client.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path})), batch.schema)
    w.write_batch(batch)
    w.done_writing()
    r.read()
    w.close()


def get(client, path):
    return client.do_get(fl.Ticket(json.dumps({"path": path}).encode())).read_all()


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ["QUIVER"]
    base = tempfile.mkdtemp(prefix="p46_01_")
    port = int(os.environ.get("PORT") or free_port())
    log = open(os.path.join(base, "server.log"), "wb")
    proc = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(base, "data"), "--addr", f"127.0.0.1:{port}",
                             "--max-recv-msg-size", str(300 << 20), "--max-inflight-bytes", "1GiB"],
                            stdout=subprocess.PIPE, stderr=log)
    try:
        line = proc.stdout.readline().decode()
        while line.startswith("quiver: metrics"):
            line = proc.stdout.readline().decode()
        assert "serving" in line, line
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        failed = False
        n = (256 << 20) + 4096
        one = (hashlib.sha256(b"x").digest() * (n // 32 + 1))[:n]
        shapes = {
            "one value of 256 MiB + 4 KiB": [one],
            "1,024 values of 260 KiB": [bytes([i % 251]) * (260 << 10) for i in range(1024)],
        }
        for k, (name, vals) in enumerate(shapes.items()):
            path = f"huge/p{k}"
            small = pa.RecordBatch.from_pydict({"seed": pa.array([0], pa.int64()), "v": pa.array([b"small"], pa.binary())})
            put(c, path, small)
            big = pa.RecordBatch.from_pydict({"seed": pa.array(range(1, len(vals) + 1), pa.int64()), "v": pa.array(vals, pa.binary())})
            del vals
            try:
                put(c, path, big)
            except pa.ArrowException as e:  # (pyarrow raises ArrowInvalid for INVALID_ARGUMENT)
                ok = isinstance(e, pa.ArrowInvalid) and 'column "v"' in str(e)
                print(f"{name}: refused {type(e).__name__}: {str(e)[:160]}")
                rows = get(c, path).column("v").to_pylist()
                if not ok or rows != [b"small"]:
                    print(f"FAIL: {name}: refused as {type(e).__name__} (want invalid argument naming the column), rows after it {len(rows)}")
                    failed = True
                continue
            try:
                tbl = get(c, path)
                got = dict(zip(tbl.column("seed").to_pylist(), tbl.column("v").to_pylist()))
                if got.get(0) != b"small" or len(got) != big.num_rows + 1:
                    print(f"FAIL: {name}: acknowledged, read back altered")
                    failed = True
                else:
                    print(f"{name}: acknowledged and read back")
            except pa.ArrowException as e:
                print(f"FAIL: {name}: acknowledged, then unreadable: {type(e).__name__}: {str(e)[:200]}")
                failed = True
        sys.exit(1 if failed else 0)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
