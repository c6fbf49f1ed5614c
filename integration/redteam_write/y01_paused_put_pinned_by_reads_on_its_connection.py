#!/usr/bin/env python3
"""y01: a slow producer that also *reads* through the same Flight client pins a whole
--max-recv-msg-size reservation of the in-flight budget while its put is paused; four such
clients (pure pyarrow, default server flags) hold the entire 512 MiB budget and every other put
on the server, to any profile, from any client, waits --inflight-wait (30 s) and fails
RESOURCE_EXHAUSTED "server busy" -- although the paused puts hold 4 rows.

Each client: do_put to its own profile, write one 1-row batch, then (while the producer "thinks")
make ~800 tiny DoGets of another profile through the same pyarrow FlightClient (one HTTP/2
connection). The round-23 fix (x02) makes a paused receive dormant only while its connection has
delivered <= 16 KiB since the receive started; the DoGet requests (HEADERS/DATA/WINDOW_UPDATE of
*other* streams) count, so after ~16 KiB of unrelated traffic the paused put keeps its reservation
until it returns (up to --idle-timeout, 5 min). A raw HTTP/2 client gets the same with ~21 KB of
PRIORITY, WINDOW_UPDATE or SETTINGS frames and no DoGet at all.

Contradicts operations.md "Limits": "No request may crash the server or starve the others", and
"Choosing the numbers": "A put whose client produces batches slowly holds a reservation only for
the first second of each pause ... so slow producers on connections of their own do not crowd out
other puts" (each producer here has a connection of its own; it carries no other put).
Exit 1 while the bug is present, 0 when fixed (the unrelated put succeeds promptly)."""
import os, sys, time, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")

def put(c, path, table):
    w, r = c.do_put(fl.FlightDescriptor.for_path(path), table.schema)
    w.write_table(table); w.done_writing(); r.read(); w.close()

tmp = tempfile.mkdtemp(prefix="y01_"); port = free_port()
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", os.path.join(tmp, "d"),
                      "--log-level", "error"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
bug = False
try:
    while b"serving" not in p.stdout.readline(): pass
    url = f"grpc://127.0.0.1:{port}"
    put(fl.connect(url), "p/ref", pa.table({"a": [0]}))
    slow = []
    for i in range(4):   # four slow producers, each with its own client (connection)
        c = fl.connect(url)
        w, r = c.do_put(fl.FlightDescriptor.for_path("p/slow%d" % i), pa.schema([("a", pa.int64())]))
        w.write_table(pa.table({"a": [i]})); slow.append((c, w, r))
    time.sleep(1.5)       # the paused receives are now dormant (hold nothing): x02's fix
    for c, w, r in slow:  # ... and while paused, each producer reads through its own client
        for k in range(800):
            c.do_get(fl.Ticket(b"p/ref")).read_all()
    time.sleep(1.5)
    t0 = time.time()
    try:
        put(fl.connect(url), "p/other", pa.table({"a": [1]}))
        print("unrelated 1-row put acknowledged after %.1f s" % (time.time() - t0))
        if time.time() - t0 > 5: bug = True
    except Exception as e:
        print("unrelated 1-row put FAILED after %.1f s: %s" % (time.time() - t0, str(e)[:200])); bug = True
    for c, w, r in slow:
        w.done_writing(); r.read(); w.close()
    print("the four slow puts then completed normally")
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
