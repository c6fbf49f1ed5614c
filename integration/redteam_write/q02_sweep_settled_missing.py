"""q02: the sweep action's result has no `settled` field although it wrote a
missing manifest from the commit log.

What is wrong: protocol.md (Actions, `sweep`) promises the result
`{"removed": [...], "skipped": [...], "settled": [...]}` with `settled` =
"profiles whose missing manifest was written from their log", and format.md
"Sweep" says sweep writes such a manifest "(`settled` lists them)". Observed:
the manifest IS written (server log: "sweep wrote a missing manifest from the
commit log"), but the action answers `{"removed": []}` -- no `settled` key, so
an operator cannot learn from the result that a manifest was rewritten.

Severity: LOW (documented result field missing; the repair is silent to the caller).
Exit 1 while the bug is present, 0 when fixed.
"""
import json, os, shutil, socket, subprocess, sys, tempfile, random
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", "/work/rtrun/rt33/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    ps = list(range(19500, 19600)); random.shuffle(ps)
    for p in ps:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise RuntimeError("no free port")

def main():
    base = tempfile.mkdtemp(prefix="rt33-q02-")
    data = os.path.join(base, "d"); os.mkdir(data)
    port = free_port()
    p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        if "serving" not in p.stdout.readline():
            raise RuntimeError("server did not start")
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        for mode, ids in (("write", [0, 1, 2]), ("write", [3, 4])):
            t = pa.table({"id": pa.array(ids, pa.int64())})
            w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "a/p", "mode": mode})), t.schema)
            w.write_table(t); w.done_writing(); r.read(); w.close()
        man = os.path.join(data, "a", "p", "manifest.json")
        os.remove(man)
        res = [json.loads(x.body.to_pybytes()) for x in
               c.do_action(fl.Action("sweep", json.dumps({"older_than_s": 0}).encode()))][0]
        print("sweep result:", res)
        written = json.load(open(man))["latest_data_dir"] if os.path.exists(man) else None
        print("manifest after sweep:", written)
        if written is None:
            print("manifest was not written (feature absent): nothing to check")
            return 0
        settled = res.get("settled")
        if not settled or not any("a/p" in json.dumps(x) for x in settled):
            print("BUG: the manifest of a/p was written from the log but `settled` does not list it")
            return 1
        print("OK: settled lists a/p")
        return 0
    finally:
        if p.poll() is None:
            p.terminate(); p.wait(timeout=40)
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
