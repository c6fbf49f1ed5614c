#!/usr/bin/env python3
"""e04 (HIGH): `quiver put` holds a whole line in memory, several times over,
before it looks at it: a file with no newline (a binary or a minified JSON
saved as .jsonl) or a CSV with one stray quote uses ~5-8x the file size of
client memory, then is refused at line 1 / column 1.

Here 256 MiB files: "not json ..." as .ndjson and 'a,b\\n1,"unclosed ...' as
.csv. Measured: ~1.3 GB and ~2 GB peak RSS (a 2 GB file would need
~10-16 GB) before "NDJSON line 1: not a JSON object". README: "Files are
streamed, never loaded whole". Expected: bounded memory (e.g. refuse a line
over a limit, or see the first byte is not '{'), here under 512 MiB.
"""
import sys, os, resource
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *

LIMIT_KB = 512 * 1024
s = Server()
try:
    res = {}
    chunk = b"x" * (1 << 20)
    for name, head in [("junk.ndjson", b"not json at all "), ("junk.csv", b'a,b\n1,"unclosed ')]:
        p = s.path(name)
        with open(p, "wb") as f:
            f.write(head)
            for _ in range(256):
                f.write(chunk)
        pr = subprocess.run(["/usr/bin/time", "-f", "%M", QUIVER, "put", "--progress", "never", "--server", s.addr,
                             "t/" + name.replace(".", "_"), p], capture_output=True, timeout=120)
        lines = pr.stderr.decode(errors="replace").strip().splitlines()
        rss = int(lines[-1])
        res[name] = (pr.returncode, rss, lines[0][:110])
        os.remove(p)
        print(f"{name}: exit {pr.returncode}, peak RSS {rss//1024} MiB, {lines[0][:110]}")
    ok = all(v[1] < LIMIT_KB for v in res.values())
    verdict(ok, "peak client RSS < 512 MiB for a 256 MiB file refused at its first byte",
            ", ".join(f"{k}: {v[1]//1024} MiB" for k, v in res.items()))
finally:
    s.cleanup()
