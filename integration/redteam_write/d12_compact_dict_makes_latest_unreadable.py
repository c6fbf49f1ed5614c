"""r12: `compact` of two small, readable dictionary files commits a version that DoGet cannot read (DATA_LOSS), using 1.5 GB.

Bug: a profile with a dictionary<int32, string> column gets two puts — a
write and an append — each of 300 rows pointing at one 1 MiB dictionary
value ("a"*1Mi, then "b"*1Mi). Each file is ~1.3 KB (dictionary encoded) and
the profile reads back fine. `compact` (also what --auto-compact runs) reads
both files, sees two different dictionaries, writes the column dense/PLAIN
into one ~380 MB data page (server peak RSS ~1.5 GB for 2.6 KB of input) and
commits it as the new latest version. Every DoGet then fails with DATA_LOSS
"committed file v1/0.parquet does not decode: parquet: uncompressed page size
380634547 exceeds configured limit 268435456", and `verify` has nothing to
say because the hashes match. Same root cause as r02 (the dictionary ->
dense path neither bounds memory nor cuts pages), but here no client did
anything unusual: a routine maintenance action breaks a healthy profile.

Severity: CRITICAL (compaction makes acknowledged data unreadable through
Quiver; memory amplification ~600,000x).

Expected: the compacted version reads back the same 600 rows (keep the
dictionary encoding or bound pages), with memory bounded; or compaction
fails and commits nothing.
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


def hwm_kb(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmHWM"):
            return int(l.split()[1])
    return 0


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        mk = lambda ch: pa.record_batch([D(pa.array([0] * 300, pa.int32()), pa.array([ch * (1 << 20)])),
                                         pa.array(range(300))], names=["c", "x"])
        r1 = put(c, "ops/events", [mk("a")], mk("a").schema)
        r2 = put(c, "ops/events", [mk("b")], mk("a").schema, mode="append")
        print("file sizes", r1["files"][0]["bytes"], r2["files"][0]["bytes"])
        before = get(c, "ops/events")
        print("before compact: DoGet", before.num_rows, "rows")
        try:
            res = json.loads(next(iter(c.do_action(fl.Action("compact", json.dumps({"path": "ops/events"}).encode())))).body.to_pybytes())
            print("compact committed", res["version"], [f["bytes"] for f in res["files"]])
        except (fl.FlightError, pa.ArrowException) as e:
            print("compact refused (acceptable):", str(e)[:200])
            res = None
        peak = hwm_kb(p.pid)
        print("server peak RSS: %.0f MiB" % (peak / 1024))
        if peak > 1024 * 1024:
            bad.append("server peak RSS %.0f MiB to compact 2.6 KB of files" % (peak / 1024))
        if res is not None:
            try:
                after = get(c, "ops/events")
                if after.column("c").to_pylist() != before.column("c").to_pylist():
                    bad.append("compacted version reads back different")
                else:
                    print("after compact: DoGet ok")
            except (fl.FlightError, pa.ArrowException) as e:
                print("after compact: DoGet failed:", str(e)[:250])
                bad.append("compacted latest version unreadable by DoGet")
    finally:
        p.terminate(); p.wait(10); shutil.rmtree(d, ignore_errors=True)
    if bad:
        print("BUG:", "; ".join(bad)); return 1
    print("OK"); return 0


if __name__ == "__main__":
    sys.exit(main())
