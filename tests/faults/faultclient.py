#!/usr/bin/env python3
"""Misbehaving clients for tests/faults/test_faults.sh, on raw sockets (no
HTTP library would misbehave on purpose). Each subcommand prints one line
"ok ..." or "FAIL ..." and exits 0 or 1.

  h2-reset PORT        HTTP/2: a streamed completion, RST_STREAM after the
                       first DATA frame, then a second request on the same
                       connection must still be answered
  h1-close PORT        HTTP/1.1: a streamed completion, TCP close after the
                       first SSE event
  h2-stall PORT        HTTP/2 with a zero flow-control window: the server
                       cannot send a byte, so the stream must be reset
                       (max_pending_output) instead of buffering
  h1-stall PORT        HTTP/1.1 with a tiny receive buffer, never reading:
                       the server must close the connection
  h1-halfopen PORT T   HTTP/1.1: a large non-streamed answer that the client
                       never reads (as if it vanished without a FIN): the
                       server must close within about T (idle_timeout) s
                       after the answer is ready
  h1-flood PORT        HTTP/1.1: pipelined GET /health for 3 s without
                       reading: the server must stop reading (the client's
                       sends block) rather than buffer the answers, then
                       answer every complete request once the client reads
  slowloris PORT T     headers dribbled a byte a second: the server must
                       answer 408 and close within T + 2 s
  idle PORT T          a connection that sends nothing is closed within T + 2 s
"""
import socket
import struct
import sys
import time

STREAM_BODY = (b'{"prompt": "Once upon a time", "max_tokens": %d, "temperature": 0, '
               b'"ignore_eos": true, "stream": true}')


def ok(msg):
    print("ok   " + msg)
    sys.exit(0)


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def connect(port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return s


# ------------------------------------------------------------ HTTP/2 bits

def hpack_int(value, prefix_bits, first):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    # Literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2).
    return (b"\x00" + hpack_int(len(name), 7, 0) + name + hpack_int(len(value), 7, 0) + value)


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8


def h2_request(stream, port, body):
    hdrs = (hpack_literal(b":method", b"POST") + hpack_literal(b":scheme", b"http") +
            hpack_literal(b":path", b"/v1/completions") +
            hpack_literal(b":authority", b"127.0.0.1:%d" % port) +
            hpack_literal(b"content-type", b"application/json") +
            hpack_literal(b"content-length", str(len(body)).encode()))
    return frame(HEADERS, 0x4, stream, hdrs) + frame(DATA, 0x1, stream, body)


class H2Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def next(self):
        """One frame (type, flags, stream, payload) or None at EOF."""
        while True:
            if len(self.buf) >= 9:
                n = struct.unpack(">I", b"\x00" + self.buf[:3])[0]
                if len(self.buf) >= 9 + n:
                    f = self.buf[:9 + n]
                    self.buf = self.buf[9 + n:]
                    return f[3], f[4], struct.unpack(">I", f[5:9])[0] & 0x7FFFFFFF, f[9:]
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            self.buf += chunk


def h2_open(port, window=None):
    s = connect(port)
    settings = b""
    if window is not None:
        settings = struct.pack(">HI", 4, window)  # SETTINGS_INITIAL_WINDOW_SIZE
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(SETTINGS, 0, 0, settings))
    return s, H2Reader(s)


def h2_reset(port):
    s, r = h2_open(port)
    s.sendall(h2_request(1, port, STREAM_BODY % 1500))
    while True:
        f = r.next()
        if f is None:
            fail("h2-reset: the connection ended before the first DATA frame")
        t, flags, sid, payload = f
        if t == SETTINGS and not flags & 1:
            s.sendall(frame(SETTINGS, 1, 0, b""))
        if t == DATA and sid == 1 and payload:
            break
        if t == RST_STREAM and sid == 1:
            fail("h2-reset: the server reset stream 1 before streaming")
    s.sendall(frame(RST_STREAM, 0, 1, struct.pack(">I", 8)))  # CANCEL
    # The connection outlives the reset: a second request on it is answered in full.
    s.sendall(h2_request(3, port, b'{"prompt": "Hi", "max_tokens": 4, "stream": true}'))
    body = b""
    while True:
        f = r.next()
        if f is None:
            fail("h2-reset: the connection closed after RST_STREAM (body so far %r)" % body[-80:])
        t, flags, sid, payload = f
        if t == DATA and sid == 3:
            body += payload
            if flags & 1:
                break
        if t == GOAWAY:
            fail("h2-reset: GOAWAY after RST_STREAM")
    if b"data: [DONE]" not in body:
        fail("h2-reset: the second stream ended without [DONE]: %r" % body[-120:])
    ok("h2-reset: stream 1 reset mid-generation, stream 3 on the same connection answered")


def h2_stall(port):
    s, r = h2_open(port, window=0)
    s.sendall(h2_request(1, port, STREAM_BODY % 1500))
    start = time.time()
    while True:
        f = r.next()
        if f is None:
            fail("h2-stall: the connection ended without RST_STREAM on stream 1")
        t, flags, sid, payload = f
        if t == SETTINGS and not flags & 1:
            s.sendall(frame(SETTINGS, 1, 0, b""))
        if t == RST_STREAM and sid == 1:
            code = struct.unpack(">I", payload)[0]
            ok("h2-stall: stream reset (error code %d) after %.1f s with a zero window" % (code, time.time() - start))
        if t == DATA and sid == 1 and payload:
            fail("h2-stall: DATA sent despite a zero flow-control window")


# ------------------------------------------------------------ HTTP/1.1 bits

def h1_request(port, body):
    return (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (port, len(body))) + body


def h1_close(port):
    s = connect(port)
    s.sendall(h1_request(port, STREAM_BODY % 1500))
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        if not chunk:
            fail("h1-close: the server closed before the first SSE event: %r" % got[:200])
        got += chunk
    s.close()
    ok("h1-close: closed the socket after the first SSE event")


def running_requests(port):
    m = connect(port)
    m.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        c = m.recv(65536)
        if not c:
            break
        data += c
    m.close()
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("switchyard_num_requests_running{"):
            return float(line.rsplit(" ", 1)[1])
    fail("no switchyard_num_requests_running in /metrics: %r" % data[:300])


def h1_stall(port):
    s = connect(port, rcvbuf=4096)
    # Eight choices with logprobs: several MiB of SSE, more than the kernel's
    # socket buffers (tcp_wmem's maximum is 4 MiB) can hide.
    s.sendall(h1_request(port, b'{"prompt": "Once upon a time", "max_tokens": 1900, "temperature": 0, '
                               b'"ignore_eos": true, "stream": true, "n": 8, "logprobs": 5}'))
    start = time.time()
    time.sleep(0.5)
    # Never read while the request runs; it must end (cancelled) by itself.
    while running_requests(port) > 0:
        if time.time() - start > 120:
            fail("h1-stall: the request still runs after 120 s for a client that does not read")
        time.sleep(0.5)
    took = time.time() - start
    got = b""
    s.settimeout(10)
    try:
        while True:
            c = s.recv(1 << 20)
            if not c:
                break
            got += c
    except ConnectionResetError:
        pass
    except socket.timeout:
        fail("h1-stall: the request ended but the connection stayed open")
    if b"data: [DONE]" in got:
        fail("h1-stall: all %d bytes were buffered and the request finished; nothing capped the output" % len(got))
    ok("h1-stall: request cancelled and connection closed after %.1f s; %d bytes had reached the client"
       % (took, len(got)))


def h1_halfopen(port, timeout):
    s = connect(port, rcvbuf=4096)
    # 8 choices x 800 tokens with 20 top logprobs each: about 9 MiB of
    # JSON, more than the kernel's socket buffers hold.
    body = (b'{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 800, "n": 8, '
            b'"ignore_eos": true, "logprobs": true, "top_logprobs": 20}')
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    start = time.time()
    while running_requests(port) == 0:
        if time.time() - start > 10:
            fail("h1-halfopen: the request never started running")
        time.sleep(0.05)
    while running_requests(port) > 0:
        if time.time() - start > 120:
            fail("h1-halfopen: the request still runs after 120 s")
        time.sleep(0.5)
    # The answer is queued now; read nothing for idle_timeout + 3 s.
    time.sleep(timeout + 3)
    got = b""
    s.settimeout(10)
    try:
        while True:
            c = s.recv(1 << 20)
            if not c:
                break
            got += c
    except ConnectionResetError:
        pass
    except socket.timeout:
        fail("h1-halfopen: still open %d s after the answer was ready (idle_timeout %d)" % (timeout + 13, timeout))
    head, _, rest = got.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    if length and len(rest) >= length:
        fail("h1-halfopen: the whole %d-byte answer was delivered; nothing was cut" % length)
    ok("h1-halfopen: closed after %d of %d answer bytes reached a client that stopped reading" % (len(rest), length))


def h1_flood(port):
    s = connect(port)
    req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    chunk = req * 2000
    s.settimeout(0.5)
    sent, start = 0, time.time()
    # Kernel socket buffers (tcp_rmem + tcp_wmem maxima: 10 MiB) take some
    # before the sends block; a server that kept reading would take far more.
    while time.time() - start < 3 and sent < 32 << 20:
        try:
            sent += s.send(chunk)
        except socket.timeout:
            break
    if sent >= 32 << 20:
        fail("h1-flood: the server took 32 MiB of requests without the client reading an answer")
    # Complete the request cut by the last partial send, then read everything.
    if sent % len(req):
        s.settimeout(10)
        s.sendall(req[sent % len(req):])
        sent += len(req) - sent % len(req)
    want = sent // len(req)
    # Read until the answers stop (2 s of silence): no half-close, which
    # would tell the server nobody is listening any more.
    s.settimeout(2)
    data = []
    while True:
        try:
            c = s.recv(1 << 20)
        except socket.timeout:
            break
        if not c:
            break
        data.append(c)
    got = b"".join(data).count(b"HTTP/1.1 200 OK")
    if got != want:
        fail("h1-flood: %d answers for %d pipelined requests" % (got, want))
    ok("h1-flood: the server stopped reading after %.1f MiB of unread answers' requests, then answered all %d"
       % (sent / 2**20, want))


def slowloris(port, timeout):
    s = connect(port)
    head = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 64
    start = time.time()
    got = b""
    s.settimeout(0.5)
    for i in range(len(head)):
        try:
            s.send(head[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            break
        try:
            c = s.recv(4096)
            if not c:
                break
            got += c
        except socket.timeout:
            pass
        if time.time() - start > timeout + 10:
            fail("slowloris: still connected after %.1f s (header_timeout %d)" % (time.time() - start, timeout))
        time.sleep(0.5)
    took = time.time() - start
    if not got.startswith(b"HTTP/1.1 408"):
        fail("slowloris: expected a 408 before the close, got %r after %.1f s" % (got[:60], took))
    if took > timeout + 2:
        fail("slowloris: closed after %.1f s, header_timeout is %d" % (took, timeout))
    ok("slowloris: 408 and close after %.1f s (header_timeout %d)" % (took, timeout))


def idle(port, timeout):
    s = connect(port)
    start = time.time()
    s.settimeout(timeout + 10)
    try:
        c = s.recv(1)
    except socket.timeout:
        fail("idle: still open after %d s (idle_timeout %d)" % (timeout + 10, timeout))
    except ConnectionResetError:
        c = b""
    took = time.time() - start
    if c:
        fail("idle: unexpected bytes %r" % c)
    if took > timeout + 2:
        fail("idle: closed after %.1f s, idle_timeout is %d" % (took, timeout))
    ok("idle: a silent connection closed after %.1f s (idle_timeout %d)" % (took, timeout))


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "h2-reset":
        h2_reset(port)
    elif cmd == "h2-stall":
        h2_stall(port)
    elif cmd == "h1-close":
        h1_close(port)
    elif cmd == "h1-halfopen":
        h1_halfopen(port, int(sys.argv[3]))
    elif cmd == "h1-flood":
        h1_flood(port)
    elif cmd == "h1-stall":
        h1_stall(port)
    elif cmd == "slowloris":
        slowloris(port, int(sys.argv[3]))
    elif cmd == "idle":
        idle(port, int(sys.argv[3]))
    else:
        fail("unknown subcommand " + cmd)


if __name__ == "__main__":
    main()
