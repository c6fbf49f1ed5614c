"""The harness the red-team rounds' S3 reproducers (r48_*.py, r49_*.py,
r50_*.py) share: versitygw and quiver on free loopback ports, a Flight
client, and an HTTP proxy
between quiver and versitygw that loses answers after forwarding
requests, delivers them late, resets connections or answers errors of its
own. QUIVER and VERSITYGW come from the environment (test_redteam_s3), or
the command line."""
import os, sys, socket, subprocess, time, json, tempfile, shutil, threading, random, re
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER") or (sys.argv[1] if len(sys.argv) > 1 else "quiver")
VGW = os.environ.get("VERSITYGW") or (sys.argv[2] if len(sys.argv) > 2 else "versitygw")
AK, SK = "rtaccess49", "rtsecret49secret"
PROCS = []
DIRS = []


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def wait_port(port, t=10):
    end = time.time() + t
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return True
        except OSError:
            time.sleep(0.05)
    return False


def start_vgw(root, port=None, ak=None, sk=None):
    port = port or free_port()
    env = dict(os.environ, ROOT_ACCESS_KEY=ak or AK, ROOT_SECRET_KEY=sk or SK)
    p = subprocess.Popen([VGW, "--port", f"127.0.0.1:{port}", "posix", root], env=env,
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(os.path.dirname(root), f"vgw{port}.log"), "ab"))
    PROCS.append(p)
    if not wait_port(port):
        raise RuntimeError("vgw did not start")
    return p, port


def start_quiver(port, bucket, prefix, logpath, extra=(), ak=None, sk=None):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ak or AK, AWS_SECRET_ACCESS_KEY=sk or SK, AWS_REGION="us-east-1")
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


def quiver_cli(args, port, bucket="bkt", prefix="pfx", ak=None, sk=None, timeout=120):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ak or AK, AWS_SECRET_ACCESS_KEY=sk or SK, AWS_REGION="us-east-1",
               QUIVER_S3_ENDPOINT=f"http://127.0.0.1:{port}", QUIVER_S3_PATH_STYLE="true")
    return subprocess.run([QUIVER, *args, "--data-dir", f"s3://{bucket}/{prefix}"], env=env,
                          capture_output=True, text=True, timeout=timeout)


def client(addr):
    return fl.connect(f"grpc://{addr}")


def put(c, path, table, mode="append", request_id=None, timeout=None, **kw):
    cmd = {"path": path, "mode": mode, **kw}
    if request_id: cmd["request_id"] = request_id
    opts = fl.FlightCallOptions(timeout=timeout) if timeout else None
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema, options=opts) if opts else \
        c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
    w.write_table(table); w.done_writing()
    buf = r.read()
    w.close()
    return json.loads(buf.to_pybytes())


def get(c, path, **kw):
    t = {"path": path, **kw}
    return c.do_get(fl.Ticket(json.dumps(t).encode())).read_all()


def action(c, name, body):
    return [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action(name, json.dumps(body).encode()))]


def e2s(e):
    return type(e).__name__ + ": " + str(e).split(". gRPC client debug")[0].split(". Detail:")[0][:400]


def cleanup():
    for p in PROCS:
        if p.poll() is None:
            try: p.kill()
            except Exception: pass
    for p in PROCS:
        try: p.wait(5)
        except Exception: pass
    for d in DIRS: shutil.rmtree(d, ignore_errors=True)


def setup(bucket="bkt", base=None):
    base = base or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix="rt49-", dir=base)
    DIRS.append(d)
    root = os.path.join(d, "s3root"); os.makedirs(os.path.join(root, bucket))
    vp, port = start_vgw(root)
    return d, root, vp, port


# ---------------------------------------------------------------- HTTP proxy
class Req:
    def __init__(self, method, target, headers, raw_head):
        self.method, self.target, self.headers, self.raw_head = method, target, headers, raw_head

    def h(self, name):
        return self.headers.get(name.lower(), "")

    def __repr__(self):
        return f"{self.method} {self.target[:120]}"


def _read_head(f):
    lines = []
    first = f.readline()
    if not first:
        return None, None
    while first in (b"\r\n", b"\n"):
        first = f.readline()
        if not first:
            return None, None
    raw = first
    headers = {}
    while True:
        l = f.readline()
        if not l:
            raise EOFError("eof in headers")
        raw += l
        if l in (b"\r\n", b"\n"):
            break
        k, _, v = l.decode("latin1").partition(":")
        headers[k.strip().lower()] = v.strip()
    return raw, headers


def _read_body(f, headers, is_head_resp=False, status=None):
    if is_head_resp or status in (204, 304) or (status is not None and 100 <= status < 200):
        return b""
    te = headers.get("transfer-encoding", "").lower()
    if "chunked" in te:
        out = b""
        while True:
            line = f.readline()
            out += line
            n = int(line.split(b";")[0].strip(), 16)
            if n == 0:
                # trailers
                while True:
                    l = f.readline(); out += l
                    if l in (b"\r\n", b"\n", b""):
                        break
                return out
            out += f.read(n + 2)
    n = int(headers.get("content-length", "0") or 0)
    return f.read(n) if n else b""


class Proxy:
    """HTTP/1.1 proxy, one upstream connection per client connection, request by request.
    self.rule(req) -> action: None/'pass', 'lost' (forward, then drop answer), 'drop' (close before forwarding),
    ('delay', s), ('partial',), ('hold', s) (forward all but the last body byte, client conn closed, send rest after s),
    ('status', code, body)"""

    def __init__(self, upstream_port):
        self.up = upstream_port
        self.rule = lambda req: None
        self.log = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0)); self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.stopped = True
        try: self.sock.close()
        except Exception: pass

    def kill_all(self):
        for c in list(self.conns):
            try: c.shutdown(socket.SHUT_RDWR)
            except Exception: pass
            try: c.close()
            except Exception: pass

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        u = None
        try:
            cf = c.makefile("rb")
            while True:
                raw, headers = _read_head(cf)
                if raw is None:
                    return
                first = raw.split(b"\r\n", 1)[0].decode("latin1")
                method, target, _ = first.split(" ", 2)
                req = Req(method, target, headers, raw)
                try:
                    act = self.rule(req)
                except Exception as ex:
                    print("rule error", ex); act = None
                with self.lock:
                    self.log.append((time.time(), repr(req), act if isinstance(act, (str, type(None))) else act[0]))
                if act and act != "pass" and act[0] == "slowdrop":
                    time.sleep(act[1]); act = "drop"
                if act == "drop":
                    try: c.shutdown(socket.SHUT_RDWR)
                    except Exception: pass
                    return
                if act and act != "pass" and act[0] == "status":
                    body = _read_body(cf, headers)
                    b = act[2].encode()
                    c.sendall(f"HTTP/1.1 {act[1]} X\r\nContent-Type: application/xml\r\nContent-Length: {len(b)}\r\n\r\n".encode() + b)
                    continue
                if u is None:
                    u = socket.create_connection(("127.0.0.1", self.up))
                    uf = u.makefile("rb")
                expect = "100-continue" in headers.get("expect", "").lower()
                u.sendall(raw)
                if expect:
                    rh, rhd = _read_head(uf)
                    st = int(rh.split(b" ")[1])
                    if st == 100:
                        c.sendall(rh)
                    else:
                        rb = _read_body(uf, rhd, method == "HEAD", st)
                        c.sendall(rh + rb)
                        return
                body = _read_body(cf, headers)
                if act and act != "pass" and act[0] == "hold":
                    u.sendall(body[:-1])
                    try: c.shutdown(socket.SHUT_RDWR)
                    except Exception: pass
                    c.close()
                    time.sleep(act[1])
                    u.sendall(body[-1:])
                    try:
                        rh, rhd = _read_head(uf)
                        with self.lock:
                            self.log.append((time.time(), "HELD-LANDED " + repr(req), rh.split(b"\r\n")[0].decode()))
                    except Exception:
                        pass
                    return
                u.sendall(body)
                rh, rhd = _read_head(uf)
                st = int(rh.split(b" ")[1])
                while st == 100:
                    rh, rhd = _read_head(uf); st = int(rh.split(b" ")[1])
                rb = _read_body(uf, rhd, method == "HEAD", st)
                with self.lock:
                    self.log.append((time.time(), "RESP " + repr(req), st))
                if act and act != "pass" and act[0] == "fwd_status":
                    b = act[2].encode()
                    c.sendall(f"HTTP/1.1 {act[1]} X\r\nContent-Type: application/xml\r\nContent-Length: {len(b)}\r\n\r\n".encode() + b)
                    continue
                if act == "lost":
                    try: c.shutdown(socket.SHUT_RDWR)
                    except Exception: pass
                    return
                if act and act != "pass" and act[0] == "delay":
                    time.sleep(act[1])
                if act and act != "pass" and act[0] == "truncbody":
                    c.sendall(rh + rb[: len(rb) // 2])
                    try: c.shutdown(socket.SHUT_RDWR)
                    except Exception: pass
                    return
                if act and act != "pass" and act[0] == "partial":
                    c.sendall((rh + rb)[: max(1, len(rh) // 2)])
                    return
                c.sendall(rh + rb)
        except Exception as ex:
            pass
        finally:
            try: c.close()
            except Exception: pass
            if u is not None:
                try: u.close()
                except Exception: pass

