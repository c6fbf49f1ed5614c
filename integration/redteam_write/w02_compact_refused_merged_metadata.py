#!/usr/bin/env python3
"""w02: evolving appends each carry field metadata (well under the 1 MiB per-put limit) on a
different column; the version's schema keeps all of it (merged per field), so compaction of
that legal, acknowledged version is refused INVALID_ARGUMENT ("schema's metadata ... more than 1048576").
Exit 1 while the bug is present, 0 when fixed (compaction succeeds, or the append that pushes the
merged metadata over the limit is refused up front)."""
import os, sys, json, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")

def put(c, desc, table):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(desc).encode()), table.schema)
    w.write_table(table); w.done_writing(); b = r.read(); w.close()
    return json.loads(b.to_pybytes())

tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d"); port = free_port()
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--log-level", "error"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
bug = False
try:
    assert b"serving" in p.stdout.readline()
    c = fl.FlightClient(f"grpc://127.0.0.1:{port}")
    base = ["c0", "c1", "c2", "c3"]
    put(c, {"path": "p/q", "mode": "write", "schema_version": "1.0.0"}, pa.table({x: [1] for x in base}))
    M = 350 * 1024
    refused_early = False
    for k in range(4):
        fields = [pa.field(x, pa.int64(), metadata=({"doc": "x" * M} if i == k else None)) for i, x in enumerate(base)]
        fields += [pa.field("n%d" % j, pa.int64()) for j in range(k + 1)]
        t = pa.table([pa.array([1])] * len(fields), schema=pa.schema(fields))
        try:
            r = put(c, {"path": "p/q", "schema_version": "1.%d.0" % (k + 1)}, t)
            print(f"append {k}: acknowledged, seq {r['seq']} (client sent {M} bytes of field metadata)")
        except Exception as e:
            print(f"append {k}: refused: {str(e)[:200]}"); refused_early = True; break
    sc = c.get_schema(fl.FlightDescriptor.for_path("p", "q")).schema
    tot = sum(len(k) + len(v) for f in sc for k, v in (f.metadata or {}).items())
    print("version's schema now carries", tot, "bytes of field metadata")
    try:
        r = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("compact", json.dumps({"path": "p/q"}).encode()))]
        print("compact OK ->", r[0]["version"])
    except Exception as e:
        print("compact failed:", str(e)[:250])
        bug = not refused_early
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
