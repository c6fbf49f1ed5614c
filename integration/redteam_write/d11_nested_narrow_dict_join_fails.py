"""r11: struct/list of dictionary<int8, …>: a put of two batches is acknowledged, then DoGet fails "unified dictionary requires a larger index type".

Bug: the rework promises "batches read are joined only while their
dictionaries still fit" for narrow index types. A write of two batches of a
struct<d: dictionary<int8, string>> column (the same with
list<dictionary<int8, string>>) is acknowledged:
  batch 1: dictionary of 123 distinct strings, 110 of them used (300 rows);
  batch 2: dictionary of 128 entries holding 118 distinct strings (some
           repeated), 5 of them used (5 rows).
Every DoGet then fails with INTERNAL "internal error (see server log)"; the
log says "read …: join batches: arrow/array: cannot combine dictionaries.
unified dictionary requires a larger index type". (Found by a fuzzer that
also hit it with list<dictionary<uint8, float64>> over 6 batches.) pyarrow
reads the stored file fine. The same data as a top-level dictionary column
reads back.

Severity: HIGH (acknowledged data unreadable through Quiver until
compaction).

Expected: DoGet returns the 305 rows with the declared type, or the put is
refused with a clear error and nothing committed.
"""
import os, sys, json, subprocess, tempfile, shutil, glob
import numpy as np
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))


def start_server():
    d = tempfile.mkdtemp(prefix="quiver_rt_", dir="/tmp")
    data = os.path.join(d, "data")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", data, "--addr", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(d, "server.log"), "w"), text=True)
    line = p.stdout.readline()
    addr = line.strip().split(" on ")[-1]
    return p, d, data, fl.connect("grpc://" + addr)


def put(client, path, batches, schema, mode="write", **kw):
    cmd = dict(path=path, mode=mode, **kw)
    w, r = client.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), schema)
    for b in batches:
        w.write_batch(b)
    w.done_writing()
    res = r.read()
    w.close()
    return json.loads(res.to_pybytes())


def get(client, path, **t):
    t["path"] = path
    return client.do_get(fl.Ticket(json.dumps(t).encode())).read_all()


def latest_files(data, path):
    prof = os.path.join(data, path)
    v = json.load(open(os.path.join(prof, "manifest.json")))["latest_data_dir"]
    return sorted(glob.glob(os.path.join(prof, v, "**", "*.parquet"), recursive=True))


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        a = D(pa.array(list(range(110)) * 2 + list(range(80)), pa.int8()), pa.array([f"a{i}" for i in range(123)]))
        b = D(pa.array([0, 1, 2, 3, 4], pa.int8()), pa.array([f"b{i % 118}" for i in range(128)]))
        for kind in ("struct", "list"):
            def wrap(x):
                if kind == "struct":
                    return pa.StructArray.from_arrays([x], names=["d"])
                return pa.ListArray.from_arrays(pa.array([0, len(x)], pa.int32()), x)
            b1 = pa.record_batch([wrap(a)], names=["c"])
            b2 = pa.record_batch([wrap(b)], names=["c"])
            exp = [v for bb in (b1, b2) for v in bb.column(0).to_pylist()]
            path = "nest/" + kind
            try:
                put(c, path, [b1, b2], b1.schema)
            except (fl.FlightError, pa.ArrowException) as e:
                print(kind, "refused (acceptable):", str(e)[:150])
                continue
            try:
                t = get(c, path)
                ok = t.column("c").to_pylist() == exp and t.schema.equals(b1.schema)
                print(kind, "DoGet", "ok" if ok else "DIFFERENT")
                if not ok:
                    bad.append(kind + ": reads back different")
            except (fl.FlightError, pa.ArrowException) as e:
                print(kind, "DoGet failed:", str(e)[:150])
                bad.append(kind + ": acknowledged data unreadable by DoGet")
    finally:
        p.terminate(); p.wait(10); shutil.rmtree(d, ignore_errors=True)
    if bad:
        print("BUG:", "; ".join(bad)); return 1
    print("OK"); return 0


if __name__ == "__main__":
    sys.exit(main())
