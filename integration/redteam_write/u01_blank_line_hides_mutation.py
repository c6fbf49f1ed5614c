"""u01: a blank line appended to one log segment (after its intact record)
makes `verify` drop that segment's record: the committed file it lists is
reported as an `orphan` ("its writer died before committing; readers do not
see it"), and the file's own tampering (a flipped byte) is not reported as
`mutated`; the detail also says "records N to N are missing" though record N
is on the segment's first line. format.md: "One damaged file never hides the
rest: each problem is reported on the file that has it".
Exit 1 while the mutated committed file is not reported `mutated`."""
import os, sys, json, glob, socket, subprocess, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))
def free_port():
    if os.environ.get("PORT"): return int(os.environ["PORT"])
    for p in range(19700, 19800):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise SystemExit("no free port")
def cmd(**kw): return fl.FlightDescriptor.for_command(json.dumps(kw).encode())
def put(c, t, **kw):
    w, r = c.do_put(cmd(**kw), t.schema); w.write_table(t); w.done_writing(); b = r.read(); w.close()
    return json.loads(b.to_pybytes())
tmp = tempfile.mkdtemp(); data = os.path.join(tmp, "d"); port = free_port()
p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--group-append-bytes", "0"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
rc = 1
try:
    assert b"serving" in p.stdout.readline()
    c = fl.FlightClient(f"grpc://127.0.0.1:{port}")
    recs = [put(c, pa.table({"a": [1, 2, 3]}), path="s/o", mode="write")]
    for i in range(3):
        recs.append(put(c, pa.table({"a": [i, i]}), path="s/o"))
    p.terminate(); p.wait(30)
    prof = os.path.join(data, "s", "o")
    target = recs[2]                       # seq 3, the append of v0/2.parquet
    seg = os.path.join(prof, ".log", "%020d.ndjson" % target["seq"])
    fpath = os.path.join(prof, target["files"][0]["path"])
    os.chmod(seg, 0o644)
    with open(seg, "a") as f: f.write("\n")          # damage 1: a blank line after the intact record
    os.chmod(fpath, 0o644)
    b = bytearray(open(fpath, "rb").read()); b[len(b) // 2] ^= 1
    open(fpath, "wb").write(b)                         # damage 2: the committed file it lists is altered
    out = subprocess.run([QUIVER, "verify", "--data-dir", data, "--json"], capture_output=True, text=True)
    rep = json.loads(out.stdout)
    for q in rep["problems"]: print(f'{q["kind"]:13} {q["path"]:22} {q["detail"][:110]}')
    rel = "s/o/" + target["files"][0]["path"]
    kinds = [q["kind"] for q in rep["problems"] if q["path"] == rel]
    print("expected: chain_broken for the segment AND mutated for", rel)
    print("actual kinds for", rel, ":", kinds)
    rc = 0 if "mutated" in kinds else 1
finally:
    if p.poll() is None: p.terminate(); p.wait(30)
    shutil.rmtree(tmp)
sys.exit(rc)
