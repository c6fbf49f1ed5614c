"""r07: `quiver get` panics (Go stack trace) on any profile with a dictionary column.

Bug: `quiver get PROFILE` writes CSV when stdout is a pipe (and with
`-o x.csv`, `--limit`, `--where`). For a profile with a
dictionary<int32, string> column (e.g. anything from a pandas categorical),
the client crashes with `panic: arrow/csv: field has unsupported data type
dictionary<values=utf8, indices=int32, ordered=false>`, exit status 2, a
goroutine dump and the build machine's module paths on stderr — instead of
the documented one-line `quiver: <message>` error, or (better) the decoded
values. `quiver get sales/orders --version v3 | head` from the README fails
this way for every such profile.

Severity: MEDIUM (the documented fetch command cannot export dictionary
columns to CSV; crash instead of an error; path-revealing stack trace).

Expected: CSV with the dictionary values decoded (as for a string column),
or a one-line `quiver: …` error with a non-zero status; never a panic.
"""
import os, sys, subprocess
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import QUIVER, serve, stop_server, put, report


def main():
    p, d, data, c, addr = serve()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        b = pa.record_batch([D(pa.array([0, 1, 0], pa.int32()), pa.array(["eu", "us"])), pa.array([1, 2, 3])],
                            names=["region", "x"])
        put(c, "sales/orders", [b], b.schema)
        out = os.path.join(d, "o.csv")
        for args in (["get", "sales/orders"], ["get", "sales/orders", "-o", out]):
            r = subprocess.run([QUIVER, *args, "--server", addr], capture_output=True, text=True, timeout=60)
            print(args, "rc", r.returncode, "stderr:", r.stderr.strip().splitlines()[:1])
            text = r.stdout if len(args) == 2 else (open(out).read() if os.path.exists(out) else "")
            if "panic" in r.stderr or "goroutine" in r.stderr:
                bad.append("%s panicked" % " ".join(args))
            elif r.returncode == 0 and not ("eu" in text and "us" in text):
                bad.append("%s: CSV lacks the values" % " ".join(args))
    finally:
        stop_server(p, d)
    return report(bad)


if __name__ == "__main__":
    sys.exit(main())
