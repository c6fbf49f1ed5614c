#!/usr/bin/env python3
"""i02 (MEDIUM): one flipped bit in the page header of a nested column's data page (its
num_values: 120 -> 112) in a committed file is not detected: DoGet answers OK and serves a
structurally invalid record batch (a struct of 120 rows whose child "y" holds 112 values;
pyarrow: "Struct child array #1 has length smaller than expected"). Projections, limits and
filters on other columns are served the same way, with --cache-dir too. A client that does
not validate what it receives can read past the end of the buffers.
format.md "Reads trust nothing": a committed file that is "not decodable" fails the read with
"committed data lost or altered" (DATA_LOSS); it never silently returns altered rows. Flat
columns get this right (the same flip in a flat column's page header is DATA_LOSS), and
pyarrow/polars reading the file directly refuse it. Seen for the last child of a struct (st.y)
and for a map's values (m.key_value.value); the first struct child, list elements and map keys
are caught (DATA_LOSS). A larger num_values is caught too.
Exit 0 = bug absent (the read fails or returns the exact rows), 1 = bug present."""
import os, re, sys, json, shutil, struct, tempfile, subprocess
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def zz(n):
    n = n << 1; out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)

def main():
    d = tempfile.mkdtemp(prefix="rt16-i02")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        addr = re.search(r"on (\S+)$", p.stdout.readline().strip()).group(1)
        c = fl.connect("grpc://" + addr)
        N = 120
        t = pa.table({"k": pa.array(range(N)),
                      "st": pa.array([{"x": i, "y": "q" * (i % 5)} for i in range(N)])})
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "c/z", "mode": "write"})), t.schema)
        w.write_table(t); w.done_writing(); res = json.loads(r.read().to_pybytes()); w.close()
        f = os.path.join(d, "c/z", res["files"][0]["path"])
        orig = open(f, "rb").read()
        md = pq.ParquetFile(f).metadata.row_group(0)
        col = [md.column(i) for i in range(md.num_columns) if md.column(i).path_in_schema == "st.y"][0]
        off = col.data_page_offset
        needle = b"\x2c\x15" + zz(N)              # DataPageHeader { num_values: N ...
        i = orig.find(needle, off, off + 40)
        assert i > 0, "page header not found"
        j = i + 2
        bad = orig[:j] + zz(N - 8) + orig[j + len(zz(N)):]
        assert len(bad) == len(orig)
        with open(f, "r+b") as fh: fh.write(bad)   # one bit: 0xf0 -> 0xe0
        print("flipped byte at", j, "(inside the data page header of column st.y, not the footer)")
        try:
            pq.read_table(f).validate(full=True); print("pyarrow direct: reads it")
        except Exception as e:
            print("pyarrow direct:", str(e)[:100])
        bug = False
        for tk in ["c/z", json.dumps({"path": "c/z", "columns": ["st"]}), json.dumps({"path": "c/z", "limit": 115})]:
            try:
                g = c.do_get(fl.Ticket(tk.encode())).read_all()
            except Exception as e:
                print(tk, "-> failed:", str(e).split(". gRPC")[0][:120]); continue
            try:
                g.validate(full=True)
                ok = g.equals(t.select(g.column_names).slice(0, g.num_rows))
                print(tk, "-> served", g.num_rows, "rows, valid, equal to what was put:", ok)
                bug |= not ok
            except Exception as e:
                print(tk, "-> served", g.num_rows, "rows, INVALID:", str(e)[:110]); bug = True
        if bug:
            print("BUG: altered committed file served as OK instead of DATA_LOSS")
        return 1 if bug else 0
    finally:
        p.terminate(); p.wait(); shutil.rmtree(d, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
