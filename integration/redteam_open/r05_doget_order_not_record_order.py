#!/usr/bin/env python3
"""r05 (LOW, documentation/ordering): when a partitioned put writes several
files per partition (the writers are finished early under --put-memory), the
commit record lists them partition by partition (k=p0/0, k=p0/1, ..., k=p1/0,
...), but DoGet and GetFlightInfo endpoint tickets serve them file number
first (k=p0/0, k=p1/0, ..., k=p0/1, ...). format.md: "Files are read in index
order; within one index, in the record's file order (partition paths sorted)".
Rows within each partition do stay in put order.

Exit 0 when DoGet follows the record's file order, 1 otherwise."""
import json, os, subprocess, sys, tempfile, random
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiver"))
d = tempfile.mkdtemp(prefix="r05_")
p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--put-memory", "1MiB"],
                     stdout=subprocess.PIPE, stderr=open(d + ".stderr", "wb"), env=dict(os.environ, QUIVER_POISON_FREED="1"))
try:
    addr = p.stdout.readline().decode().split(" on ")[-1].strip()
    c = fl.connect("grpc://" + addr)
    r = random.Random(4)
    batches = [pa.record_batch({"id": pa.array(range(j * 20000, (j + 1) * 20000), pa.int64()),
                                "k": [f"p{r.randint(0, 500)}" for _ in range(20000)],
                                "s": ["".join(r.choices("abcdefghij", k=20)) for _ in range(20000)]}) for j in range(3)]
    w, rd = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "o/p", "mode": "write", "partition_by": ["k"]})), batches[0].schema)
    for b in batches:
        w.write_batch(b)
    w.done_writing(); res = json.loads(rd.read().to_pybytes()); w.close()
    print("record file order:", [f["path"] for f in res["files"]][:4], "...")
    expected = []
    for f in res["files"]:
        expected += pq.read_table(os.path.join(d, "o/p", f["path"])).column("id").to_pylist()
    got = c.do_get(fl.Ticket(b"o/p")).read_all().column("id").to_pylist()
    info = c.get_flight_info(fl.FlightDescriptor.for_path("o/p"))
    print("first endpoint's files:", json.loads(info.endpoints[0].ticket.ticket)["files"][:4], "...")
    same = got == expected
    if not same:
        i = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        print(f"DoGet order differs from the record's file order at row {i}: id {got[i]} vs {expected[i]}")
    print("OK" if same else "BUG present")
    sys.exit(0 if same else 1)
finally:
    p.terminate(); p.wait()
