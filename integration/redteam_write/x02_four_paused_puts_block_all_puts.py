#!/usr/bin/env python3
"""x02: four puts that have sent one small batch (one row each) and then pause -- a slow
producer, which operations.md calls legitimate ("A put ... that legitimately pauses ... between
batches") -- hold the whole in-flight budget: each waiting receive reserves --max-recv-msg-size
(128 MiB) of the 512 MiB budget for as long as the stream is idle (up to --idle-timeout, 5 min).
Every other put on the server, to any profile, from any client, then waits 30 s and fails
RESOURCE_EXHAUSTED "server busy" -- although the paused streams hold 4 rows in memory.
operations.md, "Limits": "No request may crash the server or starve the others."
Exit 1 while the bug is present, 0 when fixed (the unrelated put succeeds promptly)."""
import os, sys, json, time, socket, subprocess, tempfile, shutil
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
    url = f"grpc://127.0.0.1:{port}"
    put(fl.FlightClient(url), {"path": "p/other", "mode": "write"}, pa.table({"a": [0]}))
    slow = []
    for i in range(4):   # four slow producers: one 1-row batch sent, the next one not yet
        c = fl.FlightClient(url)
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "p/slow%d" % i}).encode()), pa.schema([("a", pa.int64())]))
        w.write_table(pa.table({"a": [i]})); slow.append((c, w, r))
    time.sleep(1)
    t0 = time.time()
    try:
        put(fl.FlightClient(url), {"path": "p/other"}, pa.table({"a": [1]}))
        print("unrelated 1-row put acknowledged after %.1f s" % (time.time() - t0))
        if time.time() - t0 > 5: bug = True
    except Exception as e:
        print("unrelated 1-row put FAILED after %.1f s: %s" % (time.time() - t0, str(e).split("; retry")[0][:220])); bug = True
    for c, w, r in slow:
        w.done_writing(); r.read(); w.close()
    print("the four slow puts then completed normally")
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
