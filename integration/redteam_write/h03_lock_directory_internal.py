#!/usr/bin/env python3
"""h03 (LOW): a manifest lock path that is a directory (manifest.json.write_lock/ made by a
mistaken tool or operator) makes puts fail with INTERNAL "internal error (see server log)"
(not the documented UNAVAILABLE lock timeout / DATA_LOSS), and the break-lock action, which
"explains itself otherwise", also answers INTERNAL with no explanation.
Exit 0 = bug absent, 1 = bug present."""
import os, re, sys, json, tempfile, subprocess
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def start(d):
    err = tempfile.NamedTemporaryFile("w+", delete=False, dir="/tmp", prefix="h03err")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--lock-timeout", "1s"], stdout=subprocess.PIPE, stderr=err, text=True)
    m = re.search(r"on (\S+)$", p.stdout.readline().strip())
    return p, fl.connect("grpc://" + m.group(1)), err.name

def put(c, path, t):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path})), t.schema)
    w.write_table(t); w.done_writing(); res = r.read(); w.close()
    return json.loads(res.to_pybytes())

def main():
    d = tempfile.mkdtemp(prefix="h03")
    p, c, errf = start(d)
    put(c, "p", pa.table({"a": [1, 2]}))
    os.mkdir(os.path.join(d, "p", "manifest.json.write_lock"))
    out = {}
    try:
        put(c, "p", pa.table({"a": [3]})); out["put"] = "OK"
    except Exception as e:
        out["put"] = str(e).split(". gRPC")[0][:150]
    try:
        out["break-lock"] = [r.body.to_pybytes().decode() for r in c.do_action(fl.Action("break-lock", b'{"path":"p"}'))]
    except Exception as e:
        out["break-lock"] = str(e).split(". gRPC")[0][:150]
    p.terminate(); p.wait()
    for k, v in out.items(): print(k, "->", v)
    if "panic" in open(errf).read():
        print("PANIC"); return 1
    if any("internal error" in str(v).lower() for v in out.values()):
        print("BUG: INTERNAL instead of a documented code / an explanation")
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
