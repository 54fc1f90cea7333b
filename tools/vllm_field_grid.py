#!/usr/bin/env python3
"""Differential grid of the request models' fields: every declared top-level field of each
route's models (as src/contract/fields.rs lists them), in turn, with each of a set of
values, in a body that also holds a truthy `mm_processor_kwargs`, replayed to a real
untrusted vLLM 0.31 server and through an mmgate `reject` gateway in front of a server of
the same kind (trusted or not).

    python3 tools/vllm_field_grid.py DIRECT_PORT GATEWAY_PORT render|pool|classify|serve

(`pool`: an embedding server, `--runner pooling --convert embed`; `classify`: one with
`--convert classify`; give the gateway the server's `vllm.pooling_task`.)

A mismatch is a different status or gate-ness, or a different gate body: mmgate answering
the gate's 400 where a field's type, bounds or validator makes vLLM answer another, or the
reverse. Values: each JSON kind, numbers on both sides of common bounds, numeric and
boolean strings, integers past 64 bits, pooling tasks and a lone surrogate. Standard
library only; deterministic.
"""
import json
import os
import re
import sys

from oracle_http import send

DP, GP, FAMILY = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
FIELDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "contract", "fields.rs")
CHAT = [("model", '"tiny"'), ("messages", '[{"role":"user","content":"Hello"}]')]
ROUTES = {
    "render": [("/v1/chat/completions/render", "CHAT", CHAT),
               ("/v1/completions/render", "COMPLETION", [("model", '"tiny"'), ("prompt", '"Hello"')]),
               ("/v1/responses/render", "RESPONSES", [("model", '"tiny"'), ("input", '"Hello"')]),
               ("/tokenize", "TOKENIZE", [("model", '"tiny"'), ("prompt", '"Hello"')]),
               ("/tokenize", "TOKENIZE", CHAT)],
    "pool": [("/v1/embeddings", "EMBEDDINGS", [("model", '"tiny"'), ("input", '"Hello"')]),
             ("/v1/embeddings", "EMBEDDINGS", CHAT),
             ("/pooling", "POOLING", [("model", '"tiny"'), ("input", '"Hello"')]),
             ("/score", "SCORE", [("model", '"tiny"'), ("queries", '"a"'), ("documents", '"b"')]),
             ("/v1/rerank", "RERANK", [("model", '"tiny"'), ("query", '"a"'), ("documents", '["b"]')])],
    "classify": [("/classify", "CLASSIFY", [("model", '"tiny"'), ("input", '"Hello"')]),
                 ("/classify", "CLASSIFY", CHAT),
                 ("/pooling", "POOLING", [("model", '"tiny"'), ("input", '"Hello"')])],
    "serve": [("/v1/chat/completions", "CHAT", CHAT + [("max_tokens", "1")]),
              ("/v1/completions", "COMPLETION", [("model", '"tiny"'), ("prompt", '"Hello"'), ("max_tokens", "1")]),
              ("/v1/responses", "RESPONSES", [("model", '"tiny"'), ("input", '"Hello"'), ("max_output_tokens", "1")])],
}[FAMILY]
VALUES = ['null', 'true', 'false', '0', '1', '-1', '2', '-2', '20', '21', '100', '1000000', '1e6', '1.5', '-0.5',
          '2.5', '0.0', '-0.0', '1e400', 'NaN', 'Infinity', '"x"', '""', '"1"', '"1.5"', '"true"', '"none"',
          '"auto"', '[]', '["a"]', '[1]', '[[1]]', '{}', '{"a":1}', '{"type":"text"}', '{"type":"json_object"}',
          '{"type":"json_schema"}', '[{"a":1}]', '9223372036854775808', '-9223372036854775809', '1.0', '3', '5',
          '"a/b"', '"\\ud800"', '"embed"', '"classify"', '"plugin"']


def tables():
    """Each table's declared field names."""
    text = open(FIELDS).read()
    out = {}
    for m in re.finditer(r"pub\(super\) const (\w+): &\[ModelTy\] = &\[(.*?)\n\];", text, re.S):
        out[m.group(1)] = sorted(set(re.findall(r'FieldTy \{ name: "([^"]+)"', m.group(2))))
    return out



def main():
    declared = tables()
    n = mismatches = 0
    seen = {}
    for path, table, base in ROUTES:
        for name in declared[table]:
            if name == "mm_processor_kwargs":
                continue
            for value in VALUES:
                members = [m for m in base if m[0] != name] + [(name, value), ("mm_processor_kwargs", '{"a":1}')]
                body = ("{" + ",".join(json.dumps(k) + ":" + v for k, v in members) + "}").encode()
                d, g = send(DP, path, body), send(GP, path, body)
                n += 1
                seen[d[:2]] = seen.get(d[:2], 0) + 1
                if d[:2] != g[:2] or (d[1] and d[2] != g[2]):
                    mismatches += 1
                    print("MISMATCH", path, name, value, "| direct", d[0], d[2][:160], "| gateway", g[0], g[2][:160])
    print("done", n, "mismatches", mismatches, seen)


main()
