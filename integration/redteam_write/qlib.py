"""Shared helpers for the red-team reproducers (server start/stop, puts, reads)."""
import atexit, json, os, re, shutil, signal, subprocess, sys, tempfile, time
import pyarrow as pa
import pyarrow.flight as fl

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("QUIVER") or os.path.join(HERE, "quiver")


class Server:
    def __init__(self, data_dir=None, extra=(), keep=False):
        self.own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="qrt7_", dir="/tmp")
        self.extra = list(extra)
        self.proc = None
        self.addr = None
        self.logpath = self.data_dir.rstrip("/") + ".log"
        self.keep = keep

    def start(self):
        self.logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--data-dir", self.data_dir, "--addr", "127.0.0.1:0", *self.extra],
            stdout=subprocess.PIPE, stderr=self.logf)
        line = self.proc.stdout.readline().decode()
        m = re.search(r"on (127\.0\.0\.1:\d+)", line)
        if not m:
            raise RuntimeError("server did not start: %r" % line)
        self.addr = m.group(1)
        atexit.register(self.cleanup)
        return self

    def client(self):
        return fl.connect("grpc://" + self.addr)

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill(); self.proc.wait()

    def log(self):
        try:
            return open(self.logpath, "rb").read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def panics(self):
        return [l for l in self.log().splitlines() if "panic" in l.lower()]

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill(); self.proc.wait()
        if self.own_dir and not self.keep:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            try: os.remove(self.logpath)
            except OSError: pass


def put(client, path_or_cmd, table, batches=None, timeout=120):
    if isinstance(path_or_cmd, dict):
        desc = fl.FlightDescriptor.for_command(json.dumps(path_or_cmd).encode())
    else:
        desc = fl.FlightDescriptor.for_path(path_or_cmd)
    opts = fl.FlightCallOptions(timeout=timeout)
    w, r = client.do_put(desc, table.schema, options=opts)
    if batches:
        for b in batches:
            w.write_batch(b)
    else:
        w.write_table(table)
    w.done_writing()
    buf = r.read()
    w.close()
    return json.loads(buf.to_pybytes())


def action(client, typ, body):
    return [json.loads(r.body.to_pybytes()) for r in client.do_action(fl.Action(typ, json.dumps(body).encode()))]


def get(client, ticket):
    if isinstance(ticket, dict):
        ticket = json.dumps(ticket).encode()
    elif isinstance(ticket, str):
        ticket = ticket.encode()
    return client.do_get(fl.Ticket(ticket)).read_all()


def get_via_info(client, cmd):
    info = client.get_flight_info(fl.FlightDescriptor.for_command(json.dumps(cmd).encode()))
    parts = [client.do_get(ep.ticket).read_all() for ep in info.endpoints]
    if not parts:
        return None
    return pa.concat_tables(parts)


def tree(d):
    out = []
    for root, dirs, files in os.walk(d):
        for f in files:
            out.append(os.path.relpath(os.path.join(root, f), d))
        for f in dirs:
            out.append(os.path.relpath(os.path.join(root, f), d) + "/")
    return sorted(out)


def result(ok, msg=""):
    print(("PASS" if ok else "FAIL") + (": " + msg if msg else ""))
    sys.exit(0 if ok else 1)
