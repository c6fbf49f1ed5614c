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
import os, sys
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import start_server, stop_server, put, get, report


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
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
