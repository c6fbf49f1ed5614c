"""p44 (red team round 44, kept as a regression test; no finding): partitioned writes whose spill
gives its space back as it goes keep every row, byte for byte.

Since 2026-12-04 a partitioned write's spill file punches out each 4 MiB of itself whose blocks are
all encoded. A span punched while one of its blocks still waits would turn that block's rows into
zeros (or fail the put). This writes shapes whose blocks straddle the 4 MiB spans (300 KB rows
between tiny ones, a block over 16 MiB then small partitions, rows just under and over 4 MiB) and a
few random trials (partitions of big, tiny or medium rows, in random subsets and orders), each row
carrying its id in its string, and checks each put through DoGet and through pyarrow.dataset on the
version directory (hive partitions), row for row by id, and the in-partition order, and `verify`.

Exit 1 when a row is lost, duplicated, moved or altered; 0 when all hold.
"""
import json, os, pathlib, random, shutil, socket, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.compute as pc, pyarrow.dataset as ds, pyarrow.flight as fl

Q = os.environ.get("QUIVER", str(pathlib.Path(__file__).resolve().parents[2] / "bin" / "quiver"))
MB = 1 << 20


def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rows:
    """Batches of (id, k, s, v): s repeats the row's id, so zeros or another row's bytes show."""

    def __init__(self):
        self.next = 0

    def batch(self, keys, sizes):
        n = len(keys)
        ids = list(range(self.next, self.next + n))
        self.next += n
        s = [(("%09d|" % i) * (sz // 10 + 1))[:sz] for i, sz in zip(ids, sizes)]
        return pa.record_batch({"id": pa.array(ids, pa.int64()), "k": pa.array(keys, pa.string()),
                                "s": pa.array(s, pa.large_string()), "v": pa.array([i * 3 for i in ids], pa.int64())})


def shapes():
    r = random.Random(44)
    out = {}
    rows = Rows()
    bs = []
    for _ in range(24):  # 300 KB rows among tiny and medium ones: blocks straddle the spans
        z = [("A", 300_001 + r.randint(0, 5000)) for _ in range(3)] + [("B", r.randint(0, 40)) for _ in range(700)] \
            + [("C", r.randint(50_000, 200_000)) for _ in range(5)]
        r.shuffle(z)
        bs.append(rows.batch([k for k, _ in z], [n for _, n in z]))
    out["mixed"] = bs
    rows = Rows()  # one block over 16 MiB (encoded at once), then small partitions, then X again
    bs = [rows.batch(["X"] * 18 + ["Y"] * 3, [MB - 7] * 18 + [10] * 3)]
    for _ in range(20):
        bs.append(rows.batch(["Y"] * 2000 + ["Z"] * 100, [r.randint(0, 30) for _ in range(2100)]))
    bs.append(rows.batch(["X"] * 2, [3 * MB + 1, 5]))
    out["big_then_small"] = bs
    rows = Rows()  # rows just under and over a span
    out["four_mib_rows"] = [rows.batch(["P", "Q"], [4 * MB - 1 - j, 4 * MB + 1 + j]) for j in range(4)]
    for t in range(4):  # random trials
        r = random.Random(4400 + t)
        rows = Rows()
        names = list(dict.fromkeys(f"{r.choice('zyxabc')}{r.randrange(1000)}" for _ in range(r.choice([2, 5, 12, 30]))))
        style = r.choice(["big", "tiny", "mix", "mix"])
        bs, total, budget = [], 0, r.randint(8 * MB, 24 * MB)
        while total < budget:
            z = []
            for p in r.sample(names, r.randint(1, len(names))):
                st = style if style != "mix" else r.choice(["big", "tiny", "mid"])
                if st == "big":
                    z += [(p, r.randint(50_000, 3 * MB // 2)) for _ in range(r.randint(1, 3))]
                elif st == "tiny":
                    z += [(p, r.randint(0, 40)) for _ in range(r.randint(1, 3000))]
                else:
                    z += [(p, r.randint(1000, 60_000)) for _ in range(r.randint(1, 200))]
            if r.random() < 0.5:
                r.shuffle(z)
            bs.append(rows.batch([k for k, _ in z], [n for _, n in z]))
            total += sum(n for _, n in z) + 20 * len(z)
        out[f"random{t}"] = bs
    return out


def compare(sent, got, label):
    probs = []
    if got.num_rows != sent.num_rows:
        return [f"{label}: {got.num_rows} rows, sent {sent.num_rows}"]
    s, g = sent.sort_by("id"), got.select(sent.column_names).sort_by("id")
    for c in sent.column_names:
        a, b = s.column(c), g.column(c)
        if a.type != b.type:
            b = b.cast(a.type)
        if not a.equals(b):
            bad = next(i for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist())) if x != y)
            probs.append(f"{label}: column {c} differs first at id {s.column('id')[bad]}")
    return probs


def in_order(got, label):
    last = {}
    for k, i in zip(got.column("k").to_pylist(), got.column("id").to_pylist()):
        if last.get(k, -1) > i:
            return [f"{label}: partition {k}: row {i} after row {last[k]}"]
        last[k] = i
    return []


def main():
    data = tempfile.mkdtemp(prefix="rt44-p44-", dir="/tmp")
    srv = None
    probs = []
    try:
        port = free_port()
        srv = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--log-level", "error"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = srv.stdout.readline()
        if b"serving" not in line:
            raise SystemExit(f"server did not start: {line!r}")
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        for name, bs in shapes().items():
            path = f"p44/{name}"
            try:
                w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path, "mode": "write", "partition_by": ["k"]})),
                                bs[0].schema)
                for b in bs:
                    w.write_batch(b)
                w.done_writing()
                meta = r.read()
                w.close()
                res = json.loads(meta.to_pybytes())
            except (pa.ArrowException, AttributeError) as e:
                probs.append(f"{name}: the put failed: {str(e)[:300]}")
                print(probs[-1], flush=True)
                continue
            sent = pa.Table.from_batches(bs)
            got = c.do_get(fl.Ticket(path.encode())).read_all()
            p = compare(sent, got, f"{name} DoGet") + in_order(got, f"{name} DoGet")
            part = ds.partitioning(pa.schema([("k", pa.string())]), flavor="hive")
            t = ds.dataset(os.path.join(data, path, res["version"]), format="parquet", partitioning=part).to_table()
            p += compare(sent, t, f"{name} pyarrow.dataset")
            v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", json.dumps({"path": path}).encode()))][0]
            if not v.get("ok"):
                p.append(f"{name} verify: {json.dumps(v)[:300]}")
            print(f"{name}: {sent.num_rows} rows, {sent.nbytes >> 20} MiB, {len(res['files'])} files: "
                  + ("ok" if not p else "; ".join(p)), flush=True)
            probs += p
    finally:
        if srv is not None and srv.poll() is None:
            srv.kill()
            srv.wait()
        shutil.rmtree(data, ignore_errors=True)
    if probs:
        print("BUG: a partitioned write lost, moved or altered rows")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
