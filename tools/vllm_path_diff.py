#!/usr/bin/env python3
"""Differential of request targets: mutated paths replayed, with a body that vLLM 0.31's gate
refuses, to a real untrusted vLLM server and through an mmgate `reject` gateway in front of
a trusted one, comparing the status and the body byte for byte (two 200s count as the same).

    python3 tools/vllm_path_diff.py DIRECT_PORT GATEWAY_PORT render|serve|pool [COUNT [SEED]] [--root-path P]

A gated path mmgate does not recognise is forwarded, and the trusted server answers 200
where the untrusted one answers the gate's 400; a path it gates wrongly gets the gate's 400
where vLLM answers 404 or 405. Targets: each family's gated paths and some neighbours with
percent-encodings (either hex case), doubled, trailing and encoded slashes, dot segments,
queries and fragments, case changes, `;` parameters, absolute form, raw and encoded
non-ASCII bytes, bytes `http::Uri` refuses (`"<>` and backtick), `*` targets; now and then
another method. Requests go out as raw bytes over a socket, so the target reaches the
server exactly as written. Standard library only; deterministic
for a seed.
"""
import random
import socket
import sys

ROOT = ''
if '--root-path' in sys.argv:
    i = sys.argv.index('--root-path'); ROOT = sys.argv[i + 1]; del sys.argv[i:i + 2]
direct, gw, family = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
rnd = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 1)

KW = '"mm_processor_kwargs":{"a":1}'
CHAT = '{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":1,' + KW + '}'
PROMPT = '{"model":"tiny","prompt":"Hello","max_tokens":1,' + KW + '}'
BODIES = {
    'render': {'/v1/chat/completions/render': CHAT, '/v1/completions/render': PROMPT,
               '/v1/responses/render': '{"model":"tiny","input":"Hello",' + KW + '}',
               '/tokenize': PROMPT, '/invocations': CHAT},
    'serve': {'/v1/chat/completions': CHAT, '/v1/completions': PROMPT,
              '/v1/chat/completions/batch': '{"model":"tiny","messages":[[{"role":"user","content":"Hello"}]],"max_tokens":1,' + KW + '}',
              '/v1/responses': '{"model":"tiny","input":"Hello","max_output_tokens":1,' + KW + '}',
              '/v1/messages': '{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"Hello"}],' + KW + '}',
              '/tokenize': PROMPT, '/invocations': CHAT, '/v1/chat/completions/render': CHAT},
    'pool': {'/v1/embeddings': '{"model":"tiny","input":"Hello",' + KW + '}',
             '/pooling': '{"model":"tiny","input":"Hello",' + KW + '}',
             '/score': '{"model":"tiny","queries":"a","documents":"b",' + KW + '}',
             '/v1/score': '{"model":"tiny","queries":"a","documents":"b",' + KW + '}',
             '/rerank': '{"model":"tiny","query":"a","documents":["b"],' + KW + '}',
             '/v1/rerank': '{"model":"tiny","query":"a","documents":["b"],' + KW + '}',
             '/v2/rerank': '{"model":"tiny","query":"a","documents":["b"],' + KW + '}',
             '/tokenize': PROMPT, '/invocations': '{"model":"tiny","input":"Hello",' + KW + '}'},
}[family]
NEIGHBOURS = ['/v1/models', '/health', '/detokenize', '/v1/chat/completion', '/v1/chat', '/v1/tokenize',
              '/v1/completions/x', '/v1/embeddings/', '/v2/chat/completions', '/v1/messages/count_tokens',
              '/v1/responses/abc', '/version', '/', '']


def pct(c, upper):
    return ''.join('%' + (f'{b:02X}' if upper else f'{b:02x}') for b in c.encode())


def mutate(p):
    kind = rnd.randrange(22)
    segs = [i for i, ch in enumerate(p) if ch == '/']
    letters = [i for i, ch in enumerate(p) if ch.isalnum()]
    if kind == 0 and letters:
        i = rnd.choice(letters); return p[:i] + pct(p[i], rnd.random() < .5) + p[i + 1:]
    if kind == 1 and segs:
        i = rnd.choice(segs); return p[:i] + rnd.choice(['%2F', '%2f']) + p[i + 1:]
    if kind == 2 and segs:
        i = rnd.choice(segs); return p[:i] + '/' + p[i:]
    if kind == 3:
        return p + '/'
    if kind == 4 and segs:
        i = rnd.choice(segs); return p[:i] + rnd.choice(['/.', '/x/..', '/%2e', '/%2E%2e/v1', '/..']) + p[i:]
    if kind == 5:
        return p + rnd.choice(['?', '?a=1', '?mm_processor_kwargs=%7B%7D', '#f', '?a#b', '%3F', '%23x', '?/x',
                               '?q="<x>"', '?a={"b":[1]}', '?`|^'])
    if kind == 6 and letters:
        i = rnd.choice(letters); return p[:i] + p[i].swapcase() + p[i + 1:]
    if kind == 7 and segs:
        i = rnd.choice(segs[1:] + [len(p)]); return p[:i] + rnd.choice([';a=b', ';', '%3B']) + p[i:]
    if kind == 8:
        return 'http://127.0.0.1' + p
    if kind == 9:
        return rnd.choice(['/', '//', '///']) + p.lstrip('/')
    if kind == 10:
        return p + rnd.choice(['%00', '%20', '+', ' ', '%C3%A9', '\u00e9', '\\', '%5C', '~', '%7E', '*',
                               '"', '<', '>', '`', '{', '}', '|', '^'])
    if kind == 11 and segs:
        i = rnd.choice(segs); return p[:i] + '\\' + p[i + 1:]
    if kind == 12 and letters:
        i = rnd.choice(letters); return p[:i] + rnd.choice(['\u00e9', '%C3%A9', '%FF', '\u212a', '\u0131', '%E2%84%AA']) + p[i + 1:]
    if kind == 13:
        return '/' + rnd.choice(['v1', 'v2', 'api', '.', 'x']) + p
    if kind == 14:
        return p.upper()
    if kind == 15 and segs:
        i = rnd.choice(segs); return p[:i] + '/%20' + p[i:]
    if kind == 16:
        if rnd.random() < .3:
            return rnd.choice(['*', '*' + p, '*?a'])
        return p + '?' + 'x' * rnd.randrange(1, 3000)
    return p


def target():
    base = rnd.choice(list(BODIES) * 3 + NEIGHBOURS)
    body = BODIES.get(base, rnd.choice(list(BODIES.values())))
    p = base
    for _ in range(rnd.choice([0, 1, 1, 1, 2, 2, 3])):
        p = mutate(p)
    if ROOT and rnd.random() < .7:
        p = (ROOT if p.startswith('/') else ROOT + '/') + p if not p.startswith('http') else p
    method = 'POST' if rnd.random() < .9 else rnd.choice(['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'post', 'HEAD'])
    return method, p, body


def send(port, method, tgt, body):
    raw = (f'{method} {tgt} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
           f'Content-Length: {len(body.encode())}\r\nConnection: close\r\n\r\n').encode('utf-8', 'surrogateescape') + body.encode()
    s = socket.create_connection(('127.0.0.1', port), timeout=120)
    s.sendall(raw)
    out = b''
    while True:
        try:
            d = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not d:
            break
        out += d
    s.close()
    head, _, rest = out.partition(b'\r\n\r\n')
    status = int(head.split(b' ')[1]) if head.startswith(b'HTTP/') else 0
    if b'transfer-encoding: chunked' in head.lower():
        body_out = b''
        while rest:
            size, _, rest = rest.partition(b'\r\n')
            k = int(size.split(b';')[0] or b'0', 16)
            if k == 0:
                break
            body_out += rest[:k]; rest = rest[k + 2:]
        rest = body_out
    return status, rest


def main():
    bad = own = 0
    for i in range(n):
        m, p, b = target()
        d = send(direct, m, p, b); g = send(gw, m, p, b)
        same = d[0] == g[0] and (d[0] == 200 or d[1] == g[1])
        if same:
            continue
        if g[1].startswith(b'mmgate') or b'"mmgate' in g[1][:40]:
            own += 1
            print(f'OWN {i} {m} {p!r}\n  direct {d[0]} {d[1][:200]!r}\n  mmgate {g[0]} {g[1][:200]!r}', flush=True)
            continue
        bad += 1
        print(f'MISMATCH {i} {m} {p!r}\n  direct {d[0]} {d[1][:200]!r}\n  mmgate {g[0]} {g[1][:200]!r}', flush=True)
    print(f'{n} targets, {bad} mismatches, {own} answered in mmgate\'s own words')


if __name__ == '__main__':
    main()
