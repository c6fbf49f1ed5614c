"""p02_s3_auth_404_reads_as_empty: an S3 auth rejection answered with HTTP 404 is taken for "no such object".

Severity: MEDIUM.
What happens: the server's credentials stop being accepted (key rotated /
user removed; versitygw, the verified service, answers an unknown access
key with HTTP 404 XAdminUserNotFound). Quiver then answers DoGet,
GetFlightInfo and list-versions of a committed profile NOT_FOUND "profile
not found", ListFlights an empty list, and `verify {}` {"ok": true,
"checked_files": 0, "problems": []} -- an auditor is told the store is
fine while nothing could be read. (With a wrong secret, HTTP 403, it answers
INTERNAL instead.)
Expected: only a NoSuchKey / NoSuchBucket (NoSuchUpload) error code means
"absent"; any other error (auth, AccessDenied, XAdminUserNotFound, ...) fails
the RPC (PERMISSION_DENIED / UNAVAILABLE / INTERNAL), and verify never
reports ok:true over objects it could not read.
Usage: python p02_s3_auth_404_reads_as_empty.py QUIVER VERSITYGW  (exit 1 = bug present)
"""
import os, sys, socket, subprocess, time, json, tempfile, shutil, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.fs as pafs

QUIVER = os.environ.get("QUIVER") or (sys.argv[1] if len(sys.argv) > 1 else "quiver")
VGW = os.environ.get("VERSITYGW") or (sys.argv[2] if len(sys.argv) > 2 else "versitygw")
AK, SK = "rtaccess48", "rtsecret48secret"
PROCS = []
DIRS = []

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start_vgw(root, port=None):
    port = port or free_port()
    env = dict(os.environ, ROOT_ACCESS_KEY=AK, ROOT_SECRET_KEY=SK)
    p = subprocess.Popen([VGW, "--port", f"127.0.0.1:{port}", "posix", root], env=env,
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(os.path.dirname(root), f"vgw{port}.log"), "ab"))
    PROCS.append(p)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return p, port
        except OSError: time.sleep(0.1)
    raise RuntimeError("vgw did not start")

def s3fs(port):
    return pafs.S3FileSystem(access_key=AK, secret_key=SK, endpoint_override=f"http://127.0.0.1:{port}", scheme="http", region="us-east-1")

def start_quiver(port, bucket, prefix, logpath, extra=()):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK, AWS_REGION="us-east-1")
    env.pop("AWS_PROFILE", None)
    cmd = [QUIVER, "serve", "--data-dir", f"s3://{bucket}/{prefix}", "--s3-endpoint", f"http://127.0.0.1:{port}",
           "--s3-path-style", "--addr", "127.0.0.1:0", *extra]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=open(logpath, "ab"), text=True)
    PROCS.append(p)
    line = p.stdout.readline()
    if "serving" not in line:
        raise RuntimeError("quiver did not start: " + line + open(logpath).read()[-2000:])
    addr = line.strip().split(" on ")[-1]
    return p, addr

def client(addr):
    return fl.connect(f"grpc://{addr}")

def put(c, path, table, mode="append", request_id=None, **kw):
    cmd = {"path": path, "mode": mode, **kw}
    if request_id: cmd["request_id"] = request_id
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
    w.write_table(table); w.done_writing()
    buf = r.read()
    w.close()
    return json.loads(buf.to_pybytes())

def get(c, path, **kw):
    t = {"path": path, **kw}
    return c.do_get(fl.Ticket(json.dumps(t).encode())).read_all()

def action(c, name, body):
    return [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action(name, json.dumps(body).encode()))]

def cleanup():
    for p in PROCS:
        if p.poll() is None:
            try: p.kill()
            except Exception: pass
    for p in PROCS:
        try: p.wait(5)
        except Exception: pass
    for d in DIRS: shutil.rmtree(d, ignore_errors=True)

def setup(bucket="bkt"):
    d = tempfile.mkdtemp(prefix="rt48-")
    DIRS.append(d)
    root = os.path.join(d, "s3root"); os.makedirs(os.path.join(root, bucket))
    vp, port = start_vgw(root)
    return d, root, vp, port

def main():
    global AK, SK
    d, root, vp, port = setup()
    qp, addr = start_quiver(port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    vp.kill(); vp.wait()
    AK, SK = "rotatedkey", "rotatedsecret"      # the gateway no longer knows the server's key
    start_vgw(root, port)
    bugs = []
    try:
        get(c, "p/q"); bugs.append("DoGet OK?")
    except fl.FlightError as e:
        if "not found" in str(e): bugs.append("DoGet: NOT_FOUND for a committed profile")
    except KeyError as e:
        bugs.append("DoGet: NOT_FOUND for a committed profile")
    try:
        lst = list(c.list_flights())
        if not lst: bugs.append("ListFlights: empty list instead of an error")
    except Exception: pass
    try:
        v = action(c, "verify", {})[0]
        if v.get("ok"): bugs.append(f"verify ok:true, checked_files={v.get('checked_files')}")
    except Exception: pass
    print(bugs)
    return 1 if bugs else 0

if __name__ == "__main__":
    pass
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
