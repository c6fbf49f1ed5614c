"""s11: DoGet of latest silently returns 0 rows after a restore that skipped dot-files
and left the latest version directory empty, although list-versions/verify already see
the tampering (DATA_LOSS / `mutated`).

Setup: profile y/B: v0 (partitioned by r, 10 rows) then v1 (unpartitioned write, 20 rows,
latest). Then simulate a restore that skipped dot-files (remove .log/, every .quiver.kind,
every .version.json and claims) and did not bring back v1's data files (v1 is an empty dir,
manifest.json still names v1).

Observed: list-versions -> DATA_LOSS ("v0 holds data files Quiver wrote, but neither its
.version.json nor a commit record"), verify -> `mutated` y/B/v0, but DoGet "y/B" (latest)
and GetFlightInfo answer an empty table: the 20 acknowledged rows of v1 are silently missing.
With the log intact, a manifest naming an empty directory is DATA_LOSS ("the manifest names
vN, which holds no data file and no commit record").

Contradicts format.md: "A deleted manifest.json or .version.json of a Quiver version, or a
manifest pointed at an empty directory, is DATA_LOSS, not an empty read", and "Reads trust
nothing ... It never silently returns fewer rows"; protocol.md DataLoss row.
Severity: MEDIUM (needs damage to storage, but the read is silently empty while the server
itself has the evidence in the same profile).

Exit 1 while the bug is present (DoGet of latest succeeds), 0 when DoGet answers DATA_LOSS.
"""
import os, sys, json, glob, shutil, socket, subprocess, tempfile
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt36/quiver")

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

def start(data, port, log):
    p = subprocess.Popen(["nice", "-n", "10", Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                         stdout=subprocess.PIPE, stderr=log)
    line = p.stdout.readline()
    if b"serving" not in line:
        p.kill(); raise SystemExit(f"server did not start: {line!r}")
    return p, fl.connect(f"grpc://127.0.0.1:{port}")

def put(c, path, table, **cmd):
    cmd["path"] = path
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
    w.write_table(table); w.done_writing(); r.read(); w.close()

def tbl(a, b):
    return pa.table({"id": list(range(a, b)), "r": [f"r{i % 3}" for i in range(a, b)]})

def main():
    tmp = tempfile.mkdtemp(prefix="rt36-s11-", dir="/tmp")
    data = os.path.join(tmp, "data"); os.mkdir(data)
    log = open(os.path.join(tmp, "server.log"), "wb")
    port = free_port()
    procs = []
    try:
        p, c = start(data, port, log); procs.append(p)
        put(c, "y/B", tbl(0, 10), mode="write", partition_by=["r"])
        put(c, "y/B", tbl(0, 20), mode="write")
        p.terminate(); p.wait()
        prof = os.path.join(data, "y", "B")
        # a restore that skipped dot-files and did not bring back v1's files
        for root, dirs, files in os.walk(data):
            for f in files:
                if f.startswith("."):
                    os.remove(os.path.join(root, f))
            for dd in list(dirs):
                if dd.startswith("."):
                    shutil.rmtree(os.path.join(root, dd)); dirs.remove(dd)
        for f in glob.glob(os.path.join(prof, "v1", "*.parquet")):
            os.remove(f)
        print("manifest:", open(os.path.join(prof, "manifest.json")).read().strip().replace("\n", " "))
        p, c = start(data, port, log); procs.append(p)
        try:
            r = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("list-versions", b'{"path": "y/B"}'))]
            print("list-versions: OK", r)
        except fl.FlightError as e:
            print("list-versions:", type(e).__name__, str(e).split(". gRPC")[0])
        v = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("verify", b'{"path": "y/B"}'))][0]
        for pr in v["problems"]:
            print("verify:", pr["kind"], pr["path"])
        bug = False
        try:
            t = c.do_get(fl.Ticket(b"y/B")).read_all()
            print(f"DoGet latest: OK, {t.num_rows} rows (expected DATA_LOSS; 20 acknowledged rows missing)")
            bug = True
        except fl.FlightError as e:
            print("DoGet latest:", type(e).__name__, str(e).split(". gRPC")[0])
            bug = "data loss" not in str(e).lower()
        try:
            info = c.get_flight_info(fl.FlightDescriptor.for_path("y", "B"))
            print("GetFlightInfo: OK, total_records", info.total_records)
        except fl.FlightError as e:
            print("GetFlightInfo:", type(e).__name__, str(e).split(". gRPC")[0])
        print("BUG PRESENT" if bug else "fixed")
        return 1 if bug else 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try: p.wait(10)
                except subprocess.TimeoutExpired: p.kill(); p.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
