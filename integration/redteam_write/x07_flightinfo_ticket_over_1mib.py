#!/usr/bin/env python3
"""x07: GetFlightInfo hands out endpoint tickets that DoGet refuses. A legal, acknowledged
partitioned write (2,048 partitions, 6 partition columns of 190-character values: every value
within the server's per-directory limit, 2,048 within the 4,096 partitions a put may have)
gets endpoint tickets listing their files' paths, ~2 MB each; DoGet then answers
INVALID_ARGUMENT "ticket is not valid JSON: longer than 1048576 bytes". So the standard
Flight read path (GetFlightInfo + DoGet, as pyarrow/ADBC clients and `quiver get` use it) cannot
read the profile at all; only a hand-made bare-path ticket does.
Exit 1 while the bug is present, 0 when every endpoint's ticket reads (and `quiver get` works)."""
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
    NP, C = 2048, 6
    cols = {"a": list(range(NP))}
    for j in range(C):
        cols["k%d" % j] = [("v" * 186 + "%04d" % i) if j == 0 else ("w" * 190) for i in range(NP)]
    r = put(c, {"path": "p/q", "mode": "write", "partition_by": ["k%d" % j for j in range(C)]}, pa.table(cols))
    print("write acknowledged: %d files, paths of %d bytes" % (len(r["files"]), len(r["files"][0]["path"])))
    print("bare-path DoGet reads", c.do_get(fl.Ticket(b"p/q")).read_all().num_rows, "rows")
    info = c.get_flight_info(fl.FlightDescriptor.for_command(json.dumps({"path": "p/q"}).encode()))
    print("GetFlightInfo: %d endpoints, ticket sizes %s" % (len(info.endpoints), [len(e.ticket.ticket) for e in info.endpoints]))
    rows = 0
    for e in info.endpoints:
        try: rows += c.do_get(e.ticket).read_all().num_rows
        except Exception as ex:
            print("DoGet of an endpoint's ticket FAILED:", str(ex).split(". gRPC")[0][:160]); bug = True; break
    if not bug: print("rows via endpoints:", rows); bug = rows != NP
    g = subprocess.run([QUIVER, "get", "--server", f"127.0.0.1:{port}", "p/q", "-o", os.path.join(tmp, "out.parquet")], capture_output=True, text=True)
    print("quiver get: exit", g.returncode, (g.stdout + g.stderr).strip()[:160])
    if g.returncode != 0: bug = True
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
