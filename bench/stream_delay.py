#!/usr/bin/env python3
"""How long a hop holds streamed events back (bench/stream_delay.sh drives it).

    python3 bench/stream_delay.py upstream PORT [GAP_MS]
    python3 bench/stream_delay.py measure NAME URL [REQUESTS]

`upstream` answers every POST with a chunked `text/event-stream` of EVENTS events, GAP_MS
apart (as a model streams tokens), each carrying the CLOCK_MONOTONIC time it was sent at;
any other request (the hops' health checks) gets a plain `200 ok` at once.
`measure` posts REQUESTS chat requests with "stream": true to URL, one at a time on one
connection, notes when each event arrives (the same clock: one machine), and prints one
markdown row: the median and the largest delay of the first event and of the later ones.
A hop that passes events on as they come adds well under a millisecond.
"""
import re
import socket
import statistics
import sys
import threading
import time
from urllib.parse import urlsplit

EVENTS = 5


def upstream(port, gap):
    srv = socket.create_server(("127.0.0.1", port))
    srv.listen(64)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, gap), daemon=True).start()


def read_request(conn, buf):
    """One request (Content-Length bodies only) off `buf` + `conn`: whether it is a POST,
    and the bytes left over; None when the connection closes."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return head.startswith(b"POST "), rest[length:]


def serve(conn, gap):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    with conn:
        while (request := read_request(conn, buf)) is not None:
            post, buf = request
            if not post:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                continue
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            for i in range(EVENTS):
                if i:
                    time.sleep(gap / 1000)
                event = b'data: {"sent_ns": %d}\n\n' % time.monotonic_ns()
                conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            done = b"data: [DONE]\n\n"
            conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))


def measure(name, url, requests):
    u = urlsplit(url)
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": true}'
    head = (f"POST {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    first, later = [], []
    with socket.create_connection((u.hostname, u.port)) as conn:
        conn.settimeout(10)
        for _ in range(requests):
            conn.sendall(head + body)
            got, seen = b"", 0
            while b"[DONE]" not in got:
                data = conn.recv(65536)
                if not data:
                    sys.exit(f"{name}: connection closed mid-stream")
                now = time.monotonic_ns()
                got += data
                # Whole stamps only: a read may end inside one.
                stamps = re.findall(rb'"sent_ns": (\d+)}', got)
                for s in stamps[seen:]:
                    delay = (now - int(s)) / 1e6
                    (first if seen == 0 else later).append(delay)
                    seen += 1
            if seen != EVENTS:
                sys.exit(f"{name}: {seen} events, want {EVENTS}")
    print(f"| {name} | {statistics.median(first):.2f} | {max(first):.2f} "
          f"| {statistics.median(later):.2f} | {max(later):.2f} |")


if __name__ == "__main__":
    if sys.argv[1] == "upstream":
        upstream(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 50)
    else:
        measure(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 10)
