"""A streaming /v1/completions server that closes keep-alive connections the
way llama-server's cpp-httplib does, for tests/bench/test_bench_keepalive.sh.

  python3 keepalive_server.py MODE      prints its port, serves until killed

MODE (what happens on each connection after its answers):
  late-close  every answer promises keep-alive (chunked, "Keep-Alive:
              timeout=5, max=100", as cpp-httplib writes it), then the server
              closes 50 ms later without reading more: a client that reused
              the connection meanwhile has its request dropped unanswered.
  mid-close   the first answer is whole and the connection kept; the second
              stops after its headers and one event, then the server closes:
              that request must count as failed, never be sent again.
  say-close   every answer carries "Connection: close" and the server closes
              after it, at once.

The log of requests (one line "POST /v1/completions" per request read) goes
to stderr, so the test can count what the server actually received.
"""
import json
import socket
import sys
import threading
import time

VOCAB = 100
MODE = sys.argv[1]
LOG = threading.Lock()


def read_request(f):
    line = f.readline()
    if not line:
        return None
    method, path, _ = line.decode().split(" ", 2)
    length = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode().partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    body = f.read(length) if length else b""
    return method, path, body


def event(obj):
    return "data: %s\n\n" % json.dumps(obj)


def chunk(s):
    b = s.encode()
    return b"%x\r\n%s\r\n" % (len(b), b)


def serve(conn):
    f = conn.makefile("rb")
    answered = 0
    try:
        while True:
            req = read_request(f)
            if req is None:
                return
            method, path, body = req
            with LOG:
                sys.stderr.write("%s %s\n" % (method, path))
                sys.stderr.flush()
            if method == "GET" and path == "/v1/models":
                b = json.dumps({"object": "list", "data": [{"id": "m", "meta": {"n_vocab": VOCAB}}]}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n%s" % (len(b), b))
                return
            if method == "GET":  # /metrics (the bench's speculative counters): this server has none
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            n = json.loads(body)["max_tokens"]
            close = b"Connection: close\r\n" if MODE == "say-close" else b"Keep-Alive: timeout=5, max=100\r\n"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                         + close + b"\r\n")
            events = [event({"choices": [{"index": 0, "text": "x", "finish_reason": None}]}) for _ in range(n)]
            if MODE == "mid-close" and answered == 1:
                conn.sendall(chunk(events[0]))
                return
            events.append(event({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}))
            events.append(event({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": n}}))
            events.append("data: [DONE]\n\n")
            conn.sendall(b"".join(chunk(e) for e in events) + b"0\r\n\r\n")
            answered += 1
            if MODE == "late-close":
                time.sleep(0.05)
                return
            if MODE == "say-close":
                return
    finally:
        f.close()
        conn.close()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
print(srv.getsockname()[1], flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
