#!/usr/bin/env python3
"""h02 (LOW): a profile's manifest.json replaced by a directory makes every RPC on the
profile (DoGet, DoPut, compact, break-lock) fail with INTERNAL "internal error (see server
log)". Docs (format.md, protocol.md): a deleted/altered manifest is DATA_LOSS ("A deleted
manifest.json ... is DATA_LOSS, not an empty read"; DataLoss: "committed data or metadata
lost or altered on the storage ... replaced by a link, directory or special file").
Exit 0 = bug absent (DATA_LOSS), 1 = bug present (INTERNAL or other)."""
import os, re, sys, json, tempfile, subprocess
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def start(d):
    err = tempfile.NamedTemporaryFile("w+", delete=False, dir="/tmp", prefix="h02err")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=err, text=True)
    m = re.search(r"on (\S+)$", p.stdout.readline().strip())
    return p, fl.connect("grpc://" + m.group(1)), err.name

def put(c, path, t):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path})), t.schema)
    w.write_table(t); w.done_writing(); res = r.read(); w.close()
    return json.loads(res.to_pybytes())

def main():
    d = tempfile.mkdtemp(prefix="h02")
    p, c, errf = start(d)
    put(c, "p", pa.table({"a": [1, 2]}))
    p.terminate(); p.wait()
    m = os.path.join(d, "p", "manifest.json"); os.remove(m); os.mkdir(m)
    p, c, errf = start(d)
    codes = {}
    for name, f in [("DoGet", lambda: c.do_get(fl.Ticket(b"p")).read_all()),
                    ("DoPut", lambda: put(c, "p", pa.table({"a": [3]}))),
                    ("compact", lambda: list(c.do_action(fl.Action("compact", b'{"path":"p"}'))))]:
        try:
            f(); codes[name] = "OK(no error)"
        except Exception as e:
            s = str(e)
            codes[name] = "DATA_LOSS" if "data loss" in s.lower() else ("INTERNAL" if "internal" in s.lower() else s.split(". gRPC")[0][:120])
    p.terminate(); p.wait()
    print(codes)
    if "panic" in open(errf).read():
        print("PANIC"); return 1
    if any(v != "DATA_LOSS" for v in codes.values()):
        print("BUG: manifest.json replaced by a directory is not reported as DATA_LOSS")
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
