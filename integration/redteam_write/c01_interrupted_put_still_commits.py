#!/usr/bin/env python3
# Red team round 12 reproducer. Exit 1 while the bug is present, 0 when fixed.
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from clib import Server, write_stream, QUIVER

"""c01 (HIGH): an interrupted `quiver put` (Ctrl-C / SIGINT) commits anyway.

README/python.md: "Ctrl-C commits nothing". The CLI prints "quiver: interrupted"
and exits 1, but if the signal arrives after the last batch was sent and before
the server answered (here: the server is waiting for the manifest lock, which a
concurrent writer holds for a moment), the server commits the put anyway. The
user is told the put failed, the new version with all rows is on disk, and as
each invocation uses a fresh request id, re-running the command writes the data
a second time. (The same window exists with SIGTERM and SIGKILL; it was first
seen without any lock: SIGTERM 0.8 s into a 60 MB put -> "interrupted", v1 committed.)
"""
s = Server("--lock-timeout", "30s")
rc = 1
try:
    pq.write_table(pa.table({"a": list(range(1000))}), s.tmp + "/a.parquet")
    r = s.put("k/p", s.tmp + "/a.parquet"); assert r.returncode == 0, r.stderr
    # another writer holds the manifest lock for a moment (an empty lock = pyrosome's lock, owner unknown)
    lock = os.path.join(s.data, "k", "p", "manifest.json.write_lock")
    open(lock, "w").close()
    before = s.snapshot()
    p = subprocess.Popen([QUIVER, "put", "--progress", "never", "--mode", "write", "k/p", s.tmp + "/a.parquet",
                          "--server", s.addr], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(2.0)                       # all data sent; the server waits for the lock
    p.send_signal(signal.SIGINT)          # the user presses Ctrl-C
    out, err = p.communicate(timeout=30)
    print(f"client exit {p.returncode}, stderr: {err.decode().strip()!r}")
    os.unlink(lock)                       # the other writer finishes
    time.sleep(3)
    after = s.snapshot()
    new = sorted(k for k in after if k not in before and k != "k/p/manifest.json.write_lock")
    versions = s.cli("versions", "k/p").stdout.decode()
    print("expected: nothing of the interrupted put on disk (README: Ctrl-C commits nothing),")
    print("          or at least a client message saying the put may have committed")
    print("new paths on disk after the interrupted put:", new)
    print(versions)
    committed = any(k.startswith("k/p/v1") for k in new)
    if p.returncode != 0 and committed:
        print("BUG: client reported 'interrupted' (exit %d) but the put was committed as v1" % p.returncode)
        rc = 1
    else:
        print("OK"); rc = 0
finally:
    s.cleanup()
sys.exit(rc)
