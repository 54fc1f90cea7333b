#!/usr/bin/env python3
"""Differential of large bodies and how they arrive: each body replayed to a real vLLM 0.31
render server and through an mmgate `reject` gateway in front of one, comparing the status
and (for anything but a 200) the body byte for byte.

    python3 tools/vllm_large_diff.py DIRECT_PORT GATEWAY_PORT [SIZE]

Bodies: completions bodies made SIZE bytes larger (200,000 by default) by whitespace or by
a long prompt (repeated or random letters, so that a coded body stays large on the wire
too), offending or not (duplicates, escaped names, `media_io_kwargs`, unclosed), sent as
they are, gzip- or deflate-coded, with a BOM, as UTF-16 or UTF-32; with a length in one
write or in pieces, chunked, and after `Expect: 100-continue`. A body longer than one read
(64 KiB) with a length is read by mmgate straight into one buffer: this checks that path
against vLLM. Raw sockets, standard library only; deterministic.
"""
import gzip, itertools, random, socket, string, sys, zlib
def raw(port, path, body, headers, chunked=False, expect=False, pieces=1):
    """One request on its own connection; the (status, body) answered."""
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(60)
    h = f"POST {path} HTTP/1.1\r\nHost: x\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    if chunked: h += "Transfer-Encoding: chunked\r\n"
    else: h += f"Content-Length: {len(body)}\r\n"
    if expect: h += "Expect: 100-continue\r\n"
    h += "Connection: close\r\n\r\n"
    s.sendall(h.encode())
    if expect:
        first = s.recv(65536)
        if not first.startswith(b"HTTP/1.1 100"):
            return parse(first + readall(s))
        rest = first[first.index(b"\r\n\r\n")+4:]
    else:
        rest = b""
    step = max(1, len(body) // pieces)
    try:
        for i in range(0, len(body), step):
            part = body[i:i+step]
            if chunked: s.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
            else: s.sendall(part)
        if chunked: s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    return parse(rest + readall(s))
def readall(s):
    """All the server sends until it closes."""
    out = b""
    while True:
        try: d = s.recv(1 << 20)
        except ConnectionResetError: break
        if not d: break
        out += d
    return out
def parse(r):
    """Status and body (de-chunked) of a raw response."""
    head, _, body = r.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head else 0
    if b"transfer-encoding: chunked" in head.lower():
        out = b""; b = body
        while b:
            n, _, b = b.partition(b"\r\n"); n = int(n, 16)
            if n == 0: break
            out += b[:n]; b = b[n+2:]
        body = out
    return status, body
pad = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
docs = {
 "kw": '{"model":"tiny",%s"prompt":"Hello","mm_processor_kwargs":{"a":1}}',
 "clean": '{"model":"tiny",%s"prompt":"Hello","mm_processor_kwargs":{}}',
 "media": '{"model":"tiny",%s"prompt":"Hello","media_io_kwargs":{"image":{"x":1}}}',
 "dup": '{"model":"tiny",%s"prompt":"Hello","mm_processor_kwargs":{"a":1},"mm_processor_kwargs":null}',
 "dup2": '{"model":"tiny",%s"prompt":"Hello","mm_processor_kwargs":null,"mm_processor_kwargs":{"a":1}}',
 "esc": '{"model":"tiny",%s"prompt":"Hello","mm_processor_kw\\u0061rgs":{"a":1}}',
 "bad": '{"model":"tiny",%s"prompt":"Hello","mm_processor_kwargs":{"a":1}',
 "longstr": '{"model":"tiny","prompt":"%s","mm_processor_kwargs":{"a":1}}',
 "longstr_clean": '{"model":"tiny","prompt":"%s"}',
 "noise": '{"model":"tiny","prompt":"%s","mm_processor_kwargs":{"a":1}}',
 "noise_clean": '{"model":"tiny","prompt":"%s","mm_processor_kwargs":null}',
}
noise = "".join(random.Random(1).choices(string.ascii_letters, k=pad))
encs = ["identity", "gzip", "deflate", "utf-8-sig", "utf-16", "utf-32-le"]
paths = ["/v1/completions/render", "/tokenize"]
D, G = int(sys.argv[1]), int(sys.argv[2])
bad = n = 0
for (name, tmpl), enc, path, (chunked, expect, pieces) in itertools.product(docs.items(), encs, paths,
        [(False, False, 1), (False, False, 7), (True, False, 5), (False, True, 3), (True, True, 2)]):
    filler = "x" * pad if "longstr" in name else noise if "noise" in name else " " * pad
    text = tmpl % filler
    headers = [("Content-Type", "application/json")]
    if enc in ("utf-8-sig", "utf-16", "utf-32-le"): body = text.encode(enc)
    else: body = text.encode()
    if enc == "gzip": body = gzip.compress(body); headers.append(("Content-Encoding", "gzip"))
    if enc == "deflate": body = zlib.compress(body); headers.append(("Content-Encoding", "deflate"))
    a = raw(D, path, body, headers, chunked, expect, pieces)
    g = raw(G, path, body, headers, chunked, expect, pieces)
    n += 1
    same = a[0] == g[0] and (a[0] == 200 or a[1] == g[1])
    if not same:
        bad += 1
        print("DIFF", name, enc, path, chunked, expect, pieces, "\n  vllm", a[0], a[1][:200], "\n  mmgate", g[0], g[1][:200])
print("done", n, "differ", bad)
