#!/usr/bin/env python3
"""j03: a DoPut FlightData message that is not valid protobuf (a truncated varint,
a reserved wire type, a non-UTF-8 descriptor path) is answered INTERNAL, and the
server logs it at error level as an internal failure, both for small messages
(the standard decoder) and for 32-64 KiB ones (Quiver's own parser, whose
message is "malformed FlightData message: ...").

Docs: protocol.md "Errors": InvalidArgument for a malformed descriptor / bad
request; Internal is "anything else (details only in the server log)";
reliability.md bug 3 ("Malformed DoPut streams were answered Internal", fixed).

Exit 0 when the bug is absent: every such put is refused with INVALID_ARGUMENT.
"""
import os, sys, json, shutil, socket, subprocess, tempfile, time, struct, random
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def free_port():
    ports = list(range(19700, 19800)); random.shuffle(ports)
    for p in ports:
        s = socket.socket()
        try: s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError: s.close()
    raise RuntimeError("no free port in 19700-19799")

class Server:
    def __init__(self, data, args=()):
        self.data = data; self.port = free_port(); self.p = None; self.args = list(args)
        self.log = data.rstrip("/") + ".server.log"
    def start(self):
        self.lf = open(self.log, "ab")
        self.p = subprocess.Popen([QUIVER, "serve", "--data-dir", self.data, "--addr", f"127.0.0.1:{self.port}", *self.args],
                                  stdout=self.lf, stderr=self.lf)
        for _ in range(400):
            try: socket.create_connection(("127.0.0.1", self.port), 0.2).close(); return fl.connect(f"grpc://127.0.0.1:{self.port}")
            except OSError: time.sleep(0.05)
        raise RuntimeError("server did not start")
    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            try: self.p.wait(10)
            except subprocess.TimeoutExpired: self.p.kill(); self.p.wait()

# --- protobuf wire helpers (FlightData: 1 descriptor, 2 data_header, 3 app_metadata, 1000 data_body)
def varint(n):
    out = bytearray(); n &= (1 << 64) - 1
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def tag(field, wt): return varint((field << 3) | wt)
def ld(field, data): return tag(field, 2) + varint(len(data)) + data
def cmd_descriptor(obj): return tag(1, 0) + varint(2) + ld(2, json.dumps(obj).encode())

def ipc_messages(batch):
    sink = pa.BufferOutputStream()
    w = pa.ipc.new_stream(sink, batch.schema); w.write_batch(batch); w.close()
    rd = pa.BufferReader(sink.getvalue()); msgs = []
    while True:
        try: m = pa.ipc.read_message(rd)
        except (StopIteration, EOFError): break
        if m is None: break
        msgs.append((m.metadata.to_pybytes(), m.body.to_pybytes() if m.body is not None else b""))
    return msgs

# --- raw gRPC over HTTP/2 (no grpcio needed)

def _frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload

def _hp_str(s):
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b)]) + b

def _hp_lit(name, value):  # literal header field without indexing, new name, no Huffman
    return b"\x00" + _hp_str(name) + _hp_str(value)

def grpc_call_raw(host, port, path, messages, timeout=20):
    """Send each bytes object of messages as one gRPC message; return (got_data_message, data_bytes)."""
    s = socket.create_connection((host, port), timeout=timeout)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, struct.pack(">HI", 4, 1 << 30)))
    hdr = (_hp_lit(":method", "POST") + _hp_lit(":scheme", "http") + _hp_lit(":path", path) +
           _hp_lit(":authority", f"{host}:{port}") + _hp_lit("content-type", "application/grpc") + _hp_lit("te", "trailers"))
    s.sendall(_frame(1, 0x4, 1, hdr))
    buf = b""
    state = {"conn_win": 65535, "stream_win": 65535, "ended": False, "data": b"", "maxframe": 16384}
    def read_frame(block=True):
        nonlocal buf
        while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
            s.settimeout(timeout if block else 0.0)
            try: chunk = s.recv(1 << 16)
            except (BlockingIOError, socket.timeout):
                if block: raise
                return None
            if not chunk:
                state["ended"] = True; return None
            buf += chunk
        n = int.from_bytes(buf[:3], "big"); ft, fl, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff
        payload = buf[9:9 + n]; buf = buf[9 + n:]
        if ft == 4 and not fl & 1:  # SETTINGS
            for i in range(0, len(payload), 6):
                k, v = struct.unpack(">HI", payload[i:i + 6])
                if k == 4: state["stream_win"] += v - 65535
                if k == 5: state["maxframe"] = v
            s.sendall(_frame(4, 1, 0))
        elif ft == 8:  # WINDOW_UPDATE
            inc = int.from_bytes(payload[:4], "big") & 0x7fffffff
            if sid == 0: state["conn_win"] += inc
            else: state["stream_win"] += inc
        elif ft == 6 and not fl & 1:  # PING
            s.sendall(_frame(6, 1, 0, payload))
        elif ft == 0 and sid == 1:  # DATA
            state["data"] += payload
            if payload:
                s.sendall(_frame(8, 0, 0, struct.pack(">I", len(payload))) + _frame(8, 0, 1, struct.pack(">I", len(payload))))
            if fl & 1: state["ended"] = True
        elif ft == 1 and sid == 1:  # HEADERS (response headers or trailers)
            if fl & 1: state["ended"] = True
        elif ft == 3 and sid == 1:  # RST_STREAM
            state["ended"] = True
        elif ft == 7:  # GOAWAY
            state["ended"] = True
        return ft
    try:
        wire = b"".join(b"\x00" + struct.pack(">I", len(m)) + m for m in messages)
        off = 0
        while off < len(wire) and not state["ended"]:
            while read_frame(block=False) is not None: pass
            win = min(state["conn_win"], state["stream_win"], state["maxframe"])
            if win <= 0:
                read_frame(block=True); continue
            chunk = wire[off:off + win]
            s.sendall(_frame(0, 0, 1, chunk)); off += len(chunk)
            state["conn_win"] -= len(chunk); state["stream_win"] -= len(chunk)
        if not state["ended"]:
            s.sendall(_frame(0, 0x1, 1))  # END_STREAM
        while not state["ended"]:
            if read_frame(block=True) is None and state["ended"]: break
    finally:
        s.close()
    return len(state["data"]) > 5, state["data"][5:]

DOPUT = "/arrow.flight.protocol.FlightService/DoPut"

def pad_to(core, size):
    # an unknown length-delimited field 7 before the core, so the message is `size` bytes
    for plen in range(max(0, size - len(core) - 12), size - len(core) + 1):
        m = ld(7, b"P" * plen) + core
        if len(m) == size: return m
    raise ValueError(size)

def main():
    base = tempfile.mkdtemp(prefix="rt17-j03-", dir="/tmp")
    data = os.path.join(base, "data")
    srv = Server(data)
    bad = []
    try:
        c = srv.start()
        batch = pa.record_batch({"x": pa.array(range(100), pa.int64())})
        (sh, _), (bh, bb) = ipc_messages(batch)
        good_first = lambda p: ld(1, cmd_descriptor({"path": p})) + ld(2, sh)
        cases = []
        for size in (None, 40000):
            pad = (lambda m: m) if size is None else (lambda m, s=size: pad_to(m, s))
            tagname = "small" if size is None else f"{size}-byte"
            cases += [
                (f"{tagname} data message ending in a truncated varint", [good_first("bad/a"), pad(ld(2, bh) + ld(1000, bb) + tag(9, 0) + b"\x80")]),
                (f"{tagname} data message with reserved wire type 7", [good_first("bad/b"), pad(ld(2, bh) + ld(1000, bb) + tag(9, 7))]),
                (f"{tagname} first message whose descriptor path is not UTF-8",
                 [pad(ld(1, tag(1, 0) + varint(1) + ld(3, b"bad") + ld(3, b"x\xff")) + ld(2, sh)), ld(2, bh) + ld(1000, bb)]),
            ]
        for name, msgs in cases:
            with open(srv.log, "rb") as f: f.seek(0, 2); start = f.tell()
            ok, _ = grpc_call_raw("127.0.0.1", srv.port, DOPUT, msgs)
            time.sleep(0.3)
            with open(srv.log, "rb") as f: f.seek(start); new = f.read().decode(errors="replace")
            recs = [json.loads(l) for l in new.splitlines() if l.startswith("{") and '"method":"DoPut"' in l]
            status = recs[-1].get("status") if recs else None
            err = (recs[-1].get("error") or "")[:110] if recs else ""
            print(f"{name}: {'ACCEPTED' if ok else 'refused'}, status {status}: {err}")
            if ok or status != "InvalidArgument":
                bad.append((name, status))
        if bad:
            print("BUG: malformed FlightData protobuf is answered", sorted(set(s for _, s in bad)), "instead of InvalidArgument:")
            for n, s in bad: print("   ", n, "->", s)
            return 1
        print("OK: bug absent"); return 0
    finally:
        srv.stop(); shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
