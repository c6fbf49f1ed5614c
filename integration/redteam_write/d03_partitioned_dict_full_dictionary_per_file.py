"""r03: a partitioned put copies the whole dictionary into every partition file (disk amplification).

Bug: a put with a dictionary<int32, binary> column whose dictionary holds
8 random 1 MiB values (an 8 MiB batch), partitioned by another column into 64
partitions (one row each), is acknowledged with 64 files of ~8 MiB each:
~512 MiB on disk for an 8 MiB put. Every partition file stores the full,
mostly unused dictionary (the gather uses Take, which keeps the dictionary).
With the default limits (128 MiB messages, 4096 partitions per put) one put
can write ~512 GiB, filling the disk; reads of such a version are
correspondingly slow (100 partitions x 20 MiB: 16 s put, 7 s read of 100 rows).
A second form: a partitioned put whose batches carry growing dictionaries
(IPC delta dictionaries; 60 one-row batches, dictionary grows by one 1 MiB
value per batch, 4 partitions) stores 1,710 MiB for 60 MiB sent — each
batch's whole dictionary is copied again (quadratic); the same put
unpartitioned stores 60 MiB.

Severity: HIGH (resource exhaustion from one small authenticated put;
stored size unrelated to the data).

Expected: each partition file holds only the dictionary values its rows use
(as the read path already narrows dictionaries), so the stored size stays
proportional to the data put.
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
        nv, nparts = 8, 64
        vals = pa.array([os.urandom(1 << 20) for _ in range(nv)], pa.binary())
        b = pa.record_batch([D(pa.array([i % nv for i in range(nparts)], pa.int32()), vals),
                             pa.array(range(nparts))], names=["c", "p"])
        res = put(c, "big/parts", [b], b.schema, partition_by=["p"])
        stored = sum(f["bytes"] for f in res["files"])
        # Each partition's row uses one 1 MiB value, which its file must
        # hold: 64 MiB is the least any per-partition file layout stores
        # (the check as first written, 4x the batch's 8 MiB, could not be
        # met); the bug stored the whole 8 MiB dictionary in every file.
        used = nparts * (1 << 20)
        print("put %.1f MiB, rows use %.1f MiB, stored %.1f MiB in %d files" % (b.nbytes / 2**20, used / 2**20, stored / 2**20, len(res["files"])))
        if stored > 1.25 * used:
            bad.append("stored %.0f MiB for a %.0f MiB put whose rows use %.0f MiB" % (stored / 2**20, b.nbytes / 2**20, used / 2**20))
        t = get(c, "big/parts").sort_by("p")
        if t.column("c").to_pylist() != pa.Table.from_batches([b]).column("c").to_pylist():
            bad.append("values differ")

        # Growing dictionaries: batch i carries i+1 values of 1 MiB and
        # one row using the newest (what IPC delta dictionaries give).
        nb = 24
        grow = [os.urandom(1 << 20) for _ in range(nb)]
        batches = [pa.record_batch([D(pa.array([i], pa.int32()), pa.array(grow[:i + 1], pa.binary())),
                                    pa.array([i % 4])], names=["c", "p"]) for i in range(nb)]
        res = put(c, "big/grow", batches, batches[0].schema, partition_by=["p"])
        stored = sum(f["bytes"] for f in res["files"])
        print("growing dictionaries: rows use %d MiB, stored %.1f MiB" % (nb, stored / 2**20))
        if stored > 1.25 * nb * (1 << 20):
            bad.append("growing dictionaries: stored %.0f MiB for %d MiB of values" % (stored / 2**20, nb))
        t = get(c, "big/grow")
        if sorted(t.column("c").to_pylist()) != sorted(grow):
            bad.append("growing dictionaries: values differ")
    finally:
        p.terminate(); p.wait(10); shutil.rmtree(d, ignore_errors=True)
    if bad:
        print("BUG:", "; ".join(bad)); return 1
    print("OK"); return 0


if __name__ == "__main__":
    sys.exit(main())
