#!/usr/bin/env python3
"""Differential of mmgate's answers at the edge: malformed and mutated bodies replayed to a
real vLLM 0.31 server and through an mmgate `reject` gateway in front of it, comparing the
status and the body byte for byte.

    python3 tools/vllm_edge_diff.py DIRECT_PORT GATEWAY_PORT render|pool|serve [COUNT [SEED]] [--pad N]

`--pad N` puts N spaces after a body's first `{` (before any re-encoding), so that bodies are
large (over 64 KiB, mmgate reads them straight into one buffer).

Bodies: the recorded conformance requests (objects under 3 KB) with one to three random
edits (a byte deleted or inserted, a cut, an escape or delimiter inserted, trailing data),
and top-level values that are no object; a tenth of them re-encoded as UTF-16 or UTF-32;
content types `application/json` (also with other case, parameters and spaces),
`application/vnd.x+json` or none; the family's routes. Two 200s count as the same (their
ids and text differ by nature); an answer in mmgate's own words ("mmgate: ...", where it
cannot know vLLM's) is counted apart. Standard library only; deterministic for a seed.
"""
import http.client, json, os, random, sys, base64
PAD = 0
if '--pad' in sys.argv:
    i = sys.argv.index('--pad'); PAD = int(sys.argv[i + 1]); del sys.argv[i:i + 2]
direct, gw, family = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 600
seed = int(sys.argv[5]) if len(sys.argv) > 5 else 1
rnd = random.Random(seed)
paths = {'render': ['/v1/chat/completions/render', '/v1/completions/render', '/v1/responses/render', '/tokenize', '/invocations'],
         'serve': ['/v1/chat/completions', '/v1/completions', '/tokenize', '/invocations', '/v1/responses'],
         'pool': ['/v1/embeddings', '/pooling', '/score', '/rerank', '/invocations', '/tokenize']}[family]
seeds = []
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
shared = os.path.join(root, '..', 'shared', 'conformance', 'cases.jsonl')
for l in open(shared if os.path.exists(shared) else os.path.join(root, 'tests', 'data', 'cases.jsonl')):
    c = json.loads(l)
    b = base64.b64decode(c['request']['body_b64'])
    if b.startswith(b'{') and len(b) < 3000:
        seeds.append(b)
alphabet = b'{}[],:"\\ \t\n0123456789-+.eEnulltruefalseNaNInfinityabc\x00\x01\x7f\xc3\xa9\xff/u'
tops = [b'[]', b'[1,[2],{"a":3}]', b'"x"', b'"it\'s"', b'"a\\nb\\u00e9\\u20ac"', b'-0', b'12', b'1.5', b'1e16', b'1e-7', b'true', b'false', b'null', b'NaN', b'-Infinity', b'""', b'"/usr/x"', b' ', b'\xef\xbb\xbf', b'\xef\xbb\xbf[1]']
def mutate(b):
    b = bytearray(b)
    for _ in range(rnd.choice([1, 1, 1, 2, 3])):
        op = rnd.random()
        i = rnd.randrange(len(b) + 1)
        if op < 0.3 and b:
            del b[min(i, len(b) - 1)]
        elif op < 0.6:
            b[i:i] = bytes([rnd.choice(alphabet)])
        elif op < 0.75:
            b = b[:i]
        elif op < 0.85:
            b[i:i] = rnd.choice([b'\\u12', b'\\ud800', b'\\', b'"', b',', b'}', b']', b'\\x', b'\n'])
        else:
            b += rnd.choice([b'x', b' {', b'\n]', b',', b'  '])
    return bytes(b)
def send(port, path, body, ct):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
    h = {'content-type': ct} if ct else {}
    c.request('POST', path, body=body, headers=h)
    r = c.getresponse()
    return r.status, r.read()
diff = 0; total = 0; edge = 0
for k in range(n):
    r = rnd.random()
    if r < 0.15:
        body = rnd.choice(tops)
    else:
        body = mutate(rnd.choice(seeds))
    if PAD and b'{' in body:
        i = body.index(b'{') + 1
        body = body[:i] + b' ' * PAD + body[i:]
    if rnd.random() < 0.1:
        try:
            body = body.decode('utf-8').encode(rnd.choice(['utf-16', 'utf-16-le', 'utf-32-be']))
        except UnicodeDecodeError:
            pass
    ct = rnd.choice(['application/json'] * 6 + ['application/vnd.x+json', 'Application/JSON; charset=utf-8', ' application/json ', None])
    path = rnd.choice(paths)
    a = send(direct, path, body, ct); g = send(gw, path, body, ct)
    total += 1
    if a[0] == g[0] == 200:
        continue
    if g[1].startswith(b'{"error":{"message":"mmgate:'):
        edge += 1
        continue
    if a != g:
        diff += 1
        if diff <= 12:
            print('DIFF', path, ct, repr(body[:80]))
            print('   vllm  ', a[0], a[1][:300])
            print('   mmgate', g[0], g[1][:300])
print(f'{diff} of {total} differ; {edge} answered with mmgate\'s own words')
