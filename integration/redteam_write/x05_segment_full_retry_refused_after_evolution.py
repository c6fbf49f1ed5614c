#!/usr/bin/env python3
"""x05: round 22's segment bound answers an append that would overfill its cycle's 48 MiB log
segment UNAVAILABLE ("this commit's log segment is full ... retry"; operations.md: "it commits in
a later cycle"). For plain appends planned before a racing append that added a nullable column,
that refusal is final in disguise: the very same put retried (same data, same request id) is
refused INVALID_ARGUMENT "schema mismatch ... missing ["new"]", while the 129 identical appends
that happened to fit in the cycle were acknowledged. Which appends are told "retry" depends only
on how many records share the cycle (here each carries 64 KB of '<' metadata, ~390 KB as stored).
Exit 1 while a put refused UNAVAILABLE cannot commit by retrying it, 0 when fixed (the server
carries the overflowing appends into its next cycle itself, or the retry commits).

Since x03's fix the 64 KiB metadata bound counts what is stored, so 65,000 '<' (390 KB stored) is
refused; the script now sends 10,900 (65 KB stored), and 150 such records no longer fill a 48 MiB
segment: it checks that every append commits. The deferral to the next cycle itself is tested by
store's TestDeferredAppendPlannedBeforeEvolution and TestCycleSegmentBounded (a small segment
bound)."""
import os, sys, json, time, socket, subprocess, tempfile, shutil, threading
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

N, M = 150, 10900
tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d"); port = free_port()
# a 1 MiB message limit only so that 150 open puts fit the in-flight budget (see x02)
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--log-level", "error",
                      "--max-recv-msg-size", str(1 << 20)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
bug = False
try:
    assert b"serving" in p.stdout.readline()
    url = f"grpc://127.0.0.1:{port}"; c = fl.FlightClient(url)
    S0 = pa.schema([("a", pa.int64())])
    put(c, {"path": "p/q", "mode": "write", "schema_version": "1.0.0"}, pa.table({"a": [0]}))
    clients = [fl.FlightClient(url) for _ in range(8)]; ws = []
    for i in range(N):   # plain appends, each with 64 KB of metadata, streamed but not finished
        w, r = clients[i % 8].do_put(fl.FlightDescriptor.for_command(json.dumps(
            {"path": "p/q", "request_id": "r%d" % i, "metadata": {"m": "<" * M}}).encode()), S0)
        w.write_table(pa.table({"a": [i + 1]})); ws.append((w, r))
    time.sleep(1)
    put(c, {"path": "p/q", "schema_version": "1.1.0"}, pa.table({"a": [-5], "new": pa.array([1], pa.int64())}))
    print("an append adding the nullable column 'new' committed")
    bar = threading.Barrier(N); res = [None] * N
    def fin(i):
        w, r = ws[i]; bar.wait()
        try: w.done_writing(); r.read(); w.close(); res[i] = None
        except Exception as e: res[i] = str(e).split(". gRPC")[0]
    th = [threading.Thread(target=fin, args=(i,)) for i in range(N)]
    [x.start() for x in th]; [x.join() for x in th]
    refused = [i for i in range(N) if res[i] is not None]
    print("plain appends acknowledged:", N - len(refused), " refused:", len(refused))
    if refused: print("  e.g.:", res[refused[0]][:200]); bug = True
    for i in refused:
        if "unavailable" not in res[i].lower(): continue
        try:
            put(c, {"path": "p/q", "request_id": "r%d" % i, "metadata": {"m": "<" * M}}, pa.table({"a": [i + 1]}))
            print("retry of append %d committed" % i)
        except Exception as e:
            print("retry of append %d (told to retry) refused: %s" % (i, str(e).split(". gRPC")[0][:220])); bug = True
        break
finally:
    p.terminate(); p.wait(30); shutil.rmtree(tmp, ignore_errors=True)
print("BUG PRESENT" if bug else "OK: fixed")
sys.exit(1 if bug else 0)
