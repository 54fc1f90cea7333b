#!/usr/bin/env python3
"""Differential grid of chat messages: one message built from a role, a content and one
other member, in a body that also holds a truthy `mm_processor_kwargs`, replayed to a real
untrusted vLLM 0.31 server and through an mmgate `reject` gateway in front of a server of
the same kind.

    python3 tools/vllm_message_grid.py DIRECT_PORT GATEWAY_PORT render|pool|classify [--only N]

Each message is sent alone in `messages`, and (render only) as the Responses API's `input`,
with and without `"type": "message"`.
A mismatch is a different status or gate-ness, or a different gate body: mmgate answering the
gate's 400 where pydantic refuses the message (the union of OpenAI's message types, vLLM's
custom message and harmony's `Message`), or the reverse. Standard library only;
deterministic. `--only N` runs every N-th body (a quicker pass).
"""
import itertools
import json
import sys

from oracle_http import send

DP, GP, FAMILY = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
EVERY = int(sys.argv[sys.argv.index("--only") + 1]) if "--only" in sys.argv else 1
ROUTES = {
    "render": [("/v1/chat/completions/render", "messages"), ("/tokenize", "messages"),
               ("/v1/responses/render", "input"), ("/v1/responses/render", "typed input")],
    "pool": [("/v1/embeddings", "messages"), ("/pooling", "messages")],
    "classify": [("/classify", "messages")],
}[FAMILY]
ROLES = [None, '"user"', '"assistant"', '"system"', '"developer"', '"tool"', '"function"', '"other"', '""', "1"]
TEXT = '{"type":"text","text":"x"}'
IMAGE = '{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}'
CONTENTS = [None, "null", '"x"', '""', "[]", "[" + TEXT + "]", "[" + IMAGE + "]", "1", "true", "{}", "[1]",
            '["x"]', '[{"type":"text"}]', '[{"text":"x"}]', '[{"type":"bogus"}]', '[{"type":"refusal","refusal":"r"}]',
            '[{"type":"input_text","text":"x"}]', '[{"type":"text","text":1}]', "[" + TEXT + "," + IMAGE + "]",
            '[{"type":"image_url"}]', '[{"type":"image_url","image_url":"u"}]', '[{"type":"video_url","video_url":{"url":"u"}}]',
            '[{"type":"audio_url","audio_url":{"url":"u"}}]', '[{"type":"input_audio","input_audio":{"data":"","format":"wav"}}]',
            '[{"type":"image_pil","image_pil":null}]', '[{"type":"thinking","thinking":"t"}]',
            '[{"type":"output_text","text":"x"}]', '[{"type":"refusal","refusal":"x"}]']
CALL = '{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}'
TOOL = '{"type":"function","function":{"name":"f"}}'
OTHERS = [None, ("name", '"n"'), ("name", "1"), ("name", "null"), ("tool_call_id", '"c"'), ("tool_call_id", "1"),
          ("tool_call_id", "null"), ("tool_calls", "[]"), ("tool_calls", "[" + CALL + "]"), ("tool_calls", "1"),
          ("tool_calls", "[1]"), ("tool_calls", "null"), ("reasoning", '"r"'), ("reasoning", "1"),
          ("reasoning_content", "1"), ("reasoning_content", "null"), ("tools", "[" + TOOL + "]"), ("tools", "1"),
          ("tools", "[1]"), ("tools", "null"), ("task", '"t"'), ("task", "1"), ("refusal", "1"), ("audio", "1"),
          ("function_call", "1"), ("function_call", '{"name":"f","arguments":"{}"}'), ("author", '{"role":"user"}'),
          ("channel", "1"), ("recipient", '"r"')]



def message(role, content, other, typed):
    members = [("type", '"message"' if typed else None), ("role", role), ("content", content), other]
    return "{" + ",".join(json.dumps(k) + ":" + v for k, v in (m for m in members if m and m[1] is not None)) + "}"


def main():
    n = mismatches = 0
    seen = {}
    grid = itertools.product(ROUTES, ROLES, CONTENTS, OTHERS)
    for i, ((path, field), role, content, other) in enumerate(grid):
        if i % EVERY:
            continue
        msg = message(role, content, other, field == "typed input")
        body = ('{"model":"tiny","%s":[%s],"mm_processor_kwargs":{"a":1}}' % (field.split()[-1], msg)).encode()
        d, g = send(DP, path, body), send(GP, path, body)
        n += 1
        seen[d[:2]] = seen.get(d[:2], 0) + 1
        if d[:2] != g[:2] or (d[1] and d[2] != g[2]):
            mismatches += 1
            print("MISMATCH", path, msg, "| direct", d[0], d[2][:200], "| gateway", g[0], g[2][:120], flush=True)
    print("done", n, "mismatches", mismatches, seen)


main()
