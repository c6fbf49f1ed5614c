"""The standard peer: a Flight server built with pyarrow.flight over the
same Parquet files Quiver serves, the way a team would write one in an
afternoon (pyarrow.dataset for reads, ParquetWriter for puts).

    python bench/peer.py --root DATA_DIR --port PORT --put-dir DIR

DoGet ticket: JSON {"path": "<dir under root>", "partition": {"col": value},
"columns": [...]}; the directory is read as a hive-partitioned dataset
(hidden files are skipped by pyarrow). DoPut: the descriptor path names a
file under --put-dir, written with zstd as batches arrive.
"""

import argparse
import json
import os
import sys

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.flight as fl
import pyarrow.parquet as pq


class Peer(fl.FlightServerBase):
    def __init__(self, location, root, put_dir):
        super().__init__(location)
        self.root = root
        self.put_dir = put_dir

    def do_get(self, context, ticket):
        t = json.loads(ticket.ticket)
        d = ds.dataset(os.path.join(self.root, t["path"]), format="parquet", partitioning="hive")
        flt = None
        for col, val in (t.get("partition") or {}).items():
            e = ds.field(col) == val
            flt = e if flt is None else flt & e
        scanner = d.scanner(columns=t.get("columns"), filter=flt)
        return fl.RecordBatchStream(scanner.to_reader())

    def do_put(self, context, descriptor, reader, writer):
        name = "_".join(p.decode() if isinstance(p, bytes) else p for p in descriptor.path)
        path = os.path.join(self.put_dir, name + ".parquet")
        rows = 0
        with pq.ParquetWriter(path, reader.schema, compression="zstd") as w:
            for chunk in reader:
                w.write_batch(chunk.data)
                rows += chunk.data.num_rows
        writer.write(pa.py_buffer(json.dumps({"rows": rows}).encode()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--put-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.put_dir, exist_ok=True)
    srv = Peer(f"grpc://127.0.0.1:{a.port}", a.root, a.put_dir)
    print(f"peer: serving {a.root} on 127.0.0.1:{srv.port}", flush=True)
    srv.serve()


if __name__ == "__main__":
    sys.exit(main())
