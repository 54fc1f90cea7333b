#!/usr/bin/env python3
"""Differential hunt: generated request bodies replayed to a real vLLM 0.31 server and
through an mmgate gateway, reporting every answer that differs.

    python3 tools/vllm_diff.py DIRECT_PORT GATEWAY_PORT SEED COUNT [--pool|--serve]
    python3 tools/vllm_diff.py DIRECT_PORT GATEWAY_PORT grid [--pool|--serve]
    ... [--pad N]: N spaces after each body's first `{` (before it is encoded), so that
    bodies are large (over 64 KiB, mmgate reads them straight into one buffer)

DIRECT_PORT is an untrusted vLLM server (../shared/oracle/run.sh; `--pool`: a pooling
server, `--runner pooling --convert embed`; `--serve`: a generating `--mode serve` server,
whose bodies ask for one token; else a render server); GATEWAY_PORT an mmgate
`reject` gateway in front of a server of the same kind (trusted or not). Bodies mutate the
gated values, key spellings (escapes), duplicates, encodings, nesting near the depth
limit, and members that vLLM's earlier checks read. A mismatch is a different status,
gate-ness, or gate body; other 400 bodies are compared by tests/e2e_vllm.rs. Standard
library only; deterministic for a seed.

`grid` sends every base body with a truthy `mm_processor_kwargs` and, in turn, each list
field with elements of each kind, and each combination of the `tools`, `tool_choice`,
`cache_salt`, `background` and `store` values that the request models' own checks read.
"""
import http.client
import json
import random
import sys

GATE = ('{"error":{"message":"Per-request mm_processor_kwargs', '{"error":{"message":"Per-request media_io_kwargs')
def send(port, path, body, ctype="application/json"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = {"content-type": ctype} if ctype is not None else {}
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse(); b = r.read(); c.close()
    return r.status, b
POOL_BASES = [
  ("/v1/embeddings", [("model",'"tiny"'),("input",'"Hello"')]),
  ("/v1/embeddings", [("model",'"tiny"'),("messages",'[{"role":"user","content":"Hello"}]')]),
  ("/pooling", [("model",'"tiny"'),("input",'"Hello"')]),
  ("/score", [("model",'"tiny"'),("queries",'"a"'),("documents",'"b"')]),
  ("/v1/rerank", [("model",'"tiny"'),("query",'"a"'),("documents",'["b"]')]),
  ("/v1/embeddings", [("model",'"tiny"')]),
  ("/pooling", [("model",'"tiny"'),("prompt",'"x"')]),
]
BASES = [
  ("/v1/chat/completions/render", [("model",'"tiny"'),("messages",'[{"role":"user","content":"Hello"}]')]),
  ("/v1/completions/render", [("model",'"tiny"'),("prompt",'"Hello"')]),
  ("/tokenize", [("model",'"tiny"'),("prompt",'"Hello"')]),
  ("/tokenize", [("model",'"tiny"'),("messages",'[{"role":"user","content":"Hello"}]')]),
  ("/v1/responses/render", [("model",'"tiny"'),("input",'"Hello"')]),
  ("/v1/completions/render", [("model",'"tiny"')]),
  ("/v1/completions/render", [("model",'"tiny"'),("prompt",'""'),("stream_options",'{"include_usage":true}')]),
  ("/v1/chat/completions/render", [("model",'"tiny"'),("messages",'[{"role":"user","content":"Hello"}]'),("stream_options",'{}'),("stream",'false')]),
  ("/tokenize", [("model",'"tiny"')]),
  ("/v1/responses/render", [("model",'"tiny"'),("input",'"Hello"'),("prompt",'null')]),
]
SERVE_BASES = [
  ("/v1/chat/completions/batch", [("model",'"tiny"'),("messages",'[[{"role":"user","content":"Hello"}]]'),("max_tokens","1")]),
  ("/v1/chat/completions", [("model",'"tiny"'),("messages",'[{"role":"user","content":"Hello"}]'),("max_tokens","1")]),
  ("/v1/completions", [("model",'"tiny"'),("prompt",'"Hello"'),("max_tokens","1")]),
  ("/v1/responses", [("model",'"tiny"'),("input",'"Hello"'),("max_output_tokens","1")]),
]
if "--pool" in sys.argv:
    BASES = POOL_BASES
elif "--serve" in sys.argv:
    BASES = SERVE_BASES
DP, GP = int(sys.argv[1]), int(sys.argv[2])
PAD = int(sys.argv[sys.argv.index("--pad") + 1]) if "--pad" in sys.argv else 0
def pad(text):
    """The text with PAD spaces after its first `{`: whitespace JSON allows there."""
    return text.replace("{", "{" + " " * PAD, 1) if PAD else text
VALUES = ['null','false','true','0','0.0','-0','-0.0','-0.0e-5','1e-400','2e-324','3e-324',
 '2.4703282292062328e-324','2.4703282292062327e-324','1e400','-1e400','NaN','Infinity','-Infinity',
 '""','" "','"\\u0000"','"0"','[]','[[]]','[0]','{}','{"a":null}','{"a":1}','{"image":{}}',
 '{"image":{"x":1}}','{"video":{"num_frames":4}}','{"max_pixels":1000}','123456789012345678901234567890',
 '0e0','0E+0','-0E-0','1','{"":{}}','{"a":{"b":{}}}','{"\\ud800":{}}','"\\ud800"','{"a":NaN}','[{}]',
 '{"a":{},"a":1}','{"a":1,"a":{}}','{"image":null}','{"image":[]}','{ }','[ ]','0.000000000000000000000000001e-300',
 '1E-400','-1E+400','{"a":{"b":1},"c":{}}','"\\/"','{"image":{"a":{}}}', '1.0e-5', '0.0e99999999999999999999',
 '1e-99999999999999999999','{"a":-0}', '00', '01', '1.', '.5', '-', '+1', 'nan', 'inf', '-NaN', 'True', 'None']
# List elements of each kind, for the declared element types of list fields.
VALUES += ['[null]', '["a"]', '[1.5]', '["1"]', '[true]', '[NaN]', '[1,"a"]', '[{"role":"user","content":"x"}]', '[[1]]']
# Shapes the request types look into: conversations, score inputs, Responses items.
VALUES += ['[[{"role":"user","content":"x"}]]', '[[1.5]]', '{"content":[]}', '[{"content":[]}]', '[{"id":"r"}]',
           '[{"type":"reasoning","summary":[]}]', '[{"author":{"role":"user"}}]']
# Words the tool, salt and background checks compare.
VALUES += ['"auto"', '"required"', '"none"', '"a/b"', '"a@b"', '{"type":"function","name":"f"}']
# Pooling tasks, removed ones included (/pooling's handler and the pooling unions read them).
VALUES += ['"embed"', '"classify"', '"token_embed"', '"token_classify"', '"plugin"', '"embed&token_classify"',
           '"encode"', '"score"']
NAMES = ["mm_processor_kwargs", "media_io_kwargs", "stream_options", "stream", "prompt", "query", "queries", "prompt_embeds", "input", "messages", "logprob_token_ids", "logprobs", "top_logprobs", "prompt_logprobs", "continue_final_message", "add_generation_prompt", "use_beam_search",
         "stop", "stop_token_ids", "bad_words", "allowed_token_ids", "documents", "tools", "include",
         "tool_choice", "cache_salt", "background", "store", "dimensions", "task", "normalize", "data"]
WS = [""," ","  ","\n","\t","\r\n"," \n\t"]
def spell(rng, name):
    out = []
    for ch in name:
        if rng.random() < 0.12:
            h = "%04x" % ord(ch)
            out.append("\\u" + (h.upper() if rng.random()<0.5 else h))
        else: out.append(ch)
    s = "".join(out)
    r = rng.random()
    if r < 0.03: s = s.upper()
    elif r < 0.05: s = s + " "
    elif r < 0.06: s = "\\ud800" + s
    return s
def ws(rng):
    if rng.random() < 0.02: return rng.choice(["\x0c", "\x0b", "\xa0", "\u2028"])
    return rng.choice(WS)
def deep(rng, inner):
    d = rng.randint(940, 1010)
    o, c = rng.choice([("[","]"), ('{"k":',"}")])
    return o*d + inner + c*d, d
def body(rng):
    path, base = rng.choice(BASES)
    members = list(base)
    for _ in range(rng.choice([1,1,1,2,2,3])):
        members.insert(rng.randint(0, len(members)), (spell(rng, rng.choice(NAMES)), rng.choice(VALUES)))
    note = ""
    if rng.random() < 0.08:
        i = rng.randrange(len(members)); k, v = members[i]
        v2, d = deep(rng, v if rng.random()<0.5 else "1"); members[i] = (k, v2); note = f"deep{d}"
    if rng.random() < 0.05:
        members.insert(rng.randint(0, len(members)), ("extra", rng.choice(VALUES)))
    parts = []
    for k, v in members:
        parts.append(ws(rng) + json.dumps(k) .replace("\\\\u", "\\u") + ws(rng) + ":" + ws(rng) + v + ws(rng))
    text = ws(rng) + "{" + ",".join(parts) + "}" + ws(rng)
    r = rng.random()
    if r < 0.03: text = text[:-1] + ",}" if text.endswith("}") else text + ","
    elif r < 0.05: text = text + "x"
    elif r < 0.07: text = text[: rng.randint(1, len(text)-1)]
    elif r < 0.09: text = text.replace('"Hello"', '"Hel\\ud800lo"')
    enc = "utf-8"; e = rng.random()
    if e < 0.05: enc = "utf-8-sig"
    elif e < 0.08: enc = "utf-16-le"
    elif e < 0.11: enc = "utf-16-be"
    elif e < 0.13: enc = "utf-16"
    elif e < 0.15: enc = "utf-32-le"
    elif e < 0.17: enc = "utf-32"
    elif e < 0.18: enc = "utf-32-be"
    b = pad(text).encode(enc, "surrogatepass")
    if rng.random() < 0.02 and enc == "utf-8":
        b = b.replace(b"Hello", b"Hel\xff\xfelo", 1)
    return path, b, enc + (" " + note if note else "")
LIST_NAMES = ["stop", "stop_token_ids", "bad_words", "allowed_token_ids", "documents", "tools", "include",
              "messages", "prompt", "input", "logprob_token_ids", "prompt_embeds", "previous_input_messages",
              "queries", "query", "items", "data_1", "text_2"]
LIST_VALUES = ['[null]', '["a"]', '[1.5]', '["1"]', '[true]', '[NaN]', '[1,"a"]', '[{"role":"user","content":"x"}]',
               '[[1]]', '[1]', '[{}]', '[]', '[-Infinity]', '[0]', '["a","b","c","d"]', '["a","b","c","d","e"]',
               # lists of lists: token ids, conversations
               '[[]]', '[[1.5]]', '[["a"]]', '[[{}]]', '[[{"role":"user","content":"x"}]]', '[[{"role":"user","content":"x"}],[1]]',
               # score inputs
               '{"content":[]}', '{}', '[{"content":[]}]', '[{"content":"x"}]', '[{"content":[{}]}]',
               '["a",{"content":[{"type":"text","text":"x"}]}]', '[{"content":[{"type":"text","text":5}]}]',
               # Responses input items, harmony messages
               '[{"type":"reasoning","summary":[]}]', '[{"id":"r"}]', '[{"type":"function_call_output","output":"x"}]',
               '[{"type":"compaction_trigger"}]', '[{"role":"user","id":"r"}]', '[{"author":{"role":"user"}}]',
               '[{"author":{}}]', '[{"author":{"role":"user"},"content":"x"}]']
SALTS = ['null', '""', '"a"', '"a/b"', '"a@b"', '"a\\\\b"', '"a\\u0000b"', '"' + 'x' * 128 + '"', '"' + 'x' * 129 + '"',
         '"' + '\\u00e9' * 128 + '"', '"' + '\\u00e9' * 129 + '"', '1', 'true', '[]', '{}', '"\\ud800"', '"\\u002f"']
TOOLS = ['[]', 'null', '[{"type":"function","function":{"name":"f"}}]', '{}', '""', '[1]', None]
CHOICES = ['"none"', '"auto"', '"required"', '"foo"', 'null', '1', 'true', '{"type":"function","function":{"name":"f"}}',
           '{}', '"\\u006eone"', None]
BACKGROUND = [('true', 'false'), ('true', 'null'), ('true', '0'), ('true', None), ('false', 'false'), ('1', '""'),
              ('"x"', '[]'), ('true', 'true'), (None, 'false')]
def grid():
    """The grid's (path, body) pairs, each body ending in a truthy `mm_processor_kwargs`."""
    rows = []
    for path, base in BASES:
        for name in LIST_NAMES:
            rows += [(path, [m for m in base if m[0] != name] + [(name, v)]) for v in LIST_VALUES]
        rows += [(path, base + [("cache_salt", v)]) for v in SALTS]
        for t in TOOLS:
            for c in CHOICES:
                rows.append((path, base + ([("tools", t)] if t else []) + ([("tool_choice", c)] if c else [])))
        if "responses" in path:
            for b, st in BACKGROUND:
                rows.append((path, base + ([("background", b)] if b else []) + ([("store", st)] if st else [])))
    kwargs = ("mm_processor_kwargs", '{"a":1}')
    return [(p, pad("{" + ",".join(json.dumps(k) + ":" + v for k, v in m + [kwargs]) + "}").encode(), "grid")
            for p, m in rows]
def main():
    if sys.argv[3] == "grid":
        cases = grid()
    else:
        rng = random.Random(int(sys.argv[3]))
        cases = [body(rng) for _ in range(int(sys.argv[4]))]
    run(cases)
def run(cases):
    bad = 0; n = len(cases)
    stats = {}
    for i, (path, b, note) in enumerate(cases):
        d = send(DP, path, b); g = send(GP, path, b)
        dg, gg = d[1].startswith(GATE[0].encode()) or d[1].startswith(GATE[1].encode()), g[1].startswith(GATE[0].encode()) or g[1].startswith(GATE[1].encode())
        key = (d[0], dg); stats[key] = stats.get(key, 0) + 1
        if d[0] != g[0] or dg != gg or (dg and d[1] != g[1]):
            bad += 1
            print(f"MISMATCH {i} {path} {note}\n  body={b[:600]!r}\n  direct {d[0]} {d[1][:300]!r}\n  mmgate {g[0]} {g[1][:300]!r}", flush=True)
    print("done", n, "mismatches", bad, stats)
main()
