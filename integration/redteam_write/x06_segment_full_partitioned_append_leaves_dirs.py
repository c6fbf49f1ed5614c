#!/usr/bin/env python3
"""x06: partitioned appends refused UNAVAILABLE by round 22's segment bound ("this commit's log
segment is full ... nothing was committed: retry") leave the partition directories they created
(k=n296, ...) behind, empty, inside the committed version -- format.md: "a refused put leaves
the data directory as it found it" (r08 fixed this for other refusals). 400 concurrent appends,
each touching one new partition and carrying 64 KB of '<' metadata (~390 KB as stored), overflow
the cycle. Also reports whether `sweep --older-than 0s` removes them.
Exit 1 while refused appends leave directories, 0 when fixed.

Since x03's fix the 64 KiB metadata bound counts what is stored (65,000 '<' is 390 KB stored and
refused), and since x05's an append that would overfill a segment waits for the next cycle: the
script now sends 10,900 '<' (65 KB stored), so every append should commit, and checks that no
refused append left a directory. The directories of re-targeted and refused appends are tested by
store's TestRetargetedAppendLeavesNoDirectories."""
import os, sys, json, time, glob, socket, subprocess, tempfile, shutil, threading
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

N, M = 400, 10900
tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d"); port = free_port()
# a 1 MiB message limit only so that 400 open puts fit the in-flight budget (see x02)
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--log-level", "error",
                      "--max-recv-msg-size", str(1 << 20)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
bug = False
try:
    assert b"serving" in p.stdout.readline()
    url = f"grpc://127.0.0.1:{port}"; c = fl.FlightClient(url)
    put(c, {"path": "p/q", "mode": "write", "partition_by": ["k"]}, pa.table({"a": [0], "k": ["base"]}))
    clients = [fl.FlightClient(url) for _ in range(8)]; ws = []
    for i in range(N):
        t = pa.table({"a": [i, i], "k": ["n%d" % i, "base"]})
        w, r = clients[i % 8].do_put(fl.FlightDescriptor.for_command(json.dumps(
            {"path": "p/q", "request_id": "r%d" % i, "metadata": {"m": "<" * M}}).encode()), t.schema)
        w.write_table(t); ws.append((w, r))
    time.sleep(1)
    bar = threading.Barrier(N); res = [None] * N
    def fin(i):
        w, r = ws[i]; bar.wait()
        try: w.done_writing(); r.read(); w.close(); res[i] = None
        except Exception as e: res[i] = str(e).split(". gRPC")[0]
    th = [threading.Thread(target=fin, args=(i,)) for i in range(N)]
    [x.start() for x in th]; [x.join() for x in th]
    refused = [i for i in range(N) if res[i] is not None]
    print("acknowledged:", N - len(refused), " refused:", len(refused), ("e.g. " + res[refused[0]][:150]) if refused else "")
    time.sleep(2)
    left = [i for i in refused if os.path.isdir(os.path.join(data, "p/q/v0/k=n%d" % i))]
    print("partition directories of refused appends still on disk:", len(left),
          "(empty: %d)" % sum(1 for i in left if not os.listdir(os.path.join(data, "p/q/v0/k=n%d" % i))))
    if left: bug = True
    p.terminate(); p.wait(30)
    sw = subprocess.run([QUIVER, "sweep", "--data-dir", data, "--older-than", "0s"], capture_output=True, text=True)
    still = [i for i in left if os.path.isdir(os.path.join(data, "p/q/v0/k=n%d" % i))]
    print("after sweep --older-than 0s:", len(still), "still there")
finally:
    if p.poll() is None: p.terminate(); p.wait(30)
    shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
