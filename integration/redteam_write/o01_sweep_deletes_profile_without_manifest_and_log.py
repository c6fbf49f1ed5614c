#!/usr/bin/env python3
"""o01: deleting a profile's manifest.json and .log/ makes verify report nothing and sweep delete
every acknowledged version (the whole profile directory).

What is wrong: a Quiver profile with two committed versions (v0: write + append, v1: write + append),
each version still holding its .version.json and Quiver-stamped data files (footer
`quiver.schema_version`, `quiver.request_id`), has its manifest.json and its .log/ removed (a restore
that skipped dot-files and lost/dropped the manifest, or an operator mistake).  Then
  * `quiver verify --data-dir` answers ok=true, checked_files=0, no problem at all;
  * `quiver sweep --older-than 0s` removes v0, v1, the kind marker and the profile directory:
    every acknowledged row is deleted.

Contradicts: format.md "The commit log": "A deleted manifest.json or .version.json of a Quiver version
... is DATA_LOSS, not an empty read"; format.md "Sweep": never remove committed data, "touches nothing
in a profile ... whose records of committed data may be lost"; operations.md "Restore dot-files too"
(sweep removes nothing of such a profile; verify reports it). The data itself proves a commit: a version
holding an append's file (index 1, `.1.parquet.claim`) was committed, since Quiver "appends only to
committed versions" (format.md), so this cannot be a killed first put's leftovers; and a killed first put
leaves one version, not two.

Severity: HIGH (silent deletion of acknowledged data after metadata loss; verify says all is well).
Exit 1 while the bug is present, 0 when fixed.
"""
import os, subprocess, tempfile, time, socket, shutil, json, sys
import pyarrow as pa, pyarrow.parquet as pq

Q = os.environ.get("QUIVER", "/work/rtrun/rt31/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")

def main():
    d = tempfile.mkdtemp(prefix="rt31-o01-", dir="/tmp")
    tmp = tempfile.mkdtemp(prefix="rt31-o01in-", dir="/tmp")
    port = free_port()
    srv = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", d],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close(); break
            except OSError:
                time.sleep(0.1)
        def run(*a, offline=False):
            args = [Q, *a] + (["--data-dir", d] if offline else ["--server", f"127.0.0.1:{port}"])
            r = subprocess.run(args, capture_output=True, text=True, timeout=120)
            return r.returncode, (r.stdout + r.stderr).strip()
        n = 0
        for mode, ids in (("write", [1, 2]), ("append", [3]), ("write", [4, 5]), ("append", [6])):
            n += 1
            f = os.path.join(tmp, f"in{n}.parquet")
            pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), f)
            rc, out = run("put", "--mode", mode, "sales/orders", f)
            if rc != 0:
                print("setup put failed:", out); return 2
        print("acknowledged: 6 rows in v0 (write+append) and v1 (write+append)")
        srv.terminate(); srv.wait()
        prof = os.path.join(d, "sales", "orders")
        # the tampering: manifest.json and the commit log are gone
        os.remove(os.path.join(prof, "manifest.json"))
        shutil.rmtree(os.path.join(prof, ".log"))
        print("after removing manifest.json and .log/, profile holds:", sorted(os.listdir(prof)))
        rc, vout = run("verify", "--json", offline=True)
        v = json.JSONDecoder().raw_decode(vout)[0] if vout.startswith("{") else {"raw": vout}
        print("verify rc", rc, "ok", v.get("ok"), "problems", v.get("problems"))
        rc, sout = run("sweep", "--json", "--older-than", "0s", offline=True)
        print("sweep rc", rc, sout)
        left = []
        for root, _, files in os.walk(prof) if os.path.isdir(prof) else []:
            left += [os.path.relpath(os.path.join(root, x), prof) for x in files if x.endswith(".parquet")]
        print("data files left after sweep:", sorted(left))
        bad = False
        if rc_ok(v):
            print("BUG: verify reports no problem although 2 versions of Quiver data lost their manifest and log")
            bad = True
        if len(left) < 4:
            print("BUG: sweep deleted acknowledged data files")
            bad = True
        return 1 if bad else 0
    finally:
        if srv.poll() is None:
            srv.kill(); srv.wait()
        shutil.rmtree(d, ignore_errors=True); shutil.rmtree(tmp, ignore_errors=True)

def rc_ok(v):
    return v.get("ok") is True and not v.get("problems")

if __name__ == "__main__":
    sys.exit(main())
