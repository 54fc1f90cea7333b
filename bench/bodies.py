#!/usr/bin/env python3
"""Writes the request bodies of bench/run.sh's workloads into a directory.

    python3 bench/bodies.py DIR

Deterministic (fixed seed), so every run posts the same bytes:
- chat_2k.json       2,048 bytes: a system and a user message (plain text), max_tokens,
                     temperature and a truthy mm_processor_kwargs at the end (where the
                     OpenAI SDK's extra_body puts it).
- chat_1m_image.json 1,048,576 bytes (± 3): a user message with a text part and an
                     image_url part holding a base64 PNG data URL, then mm_processor_kwargs.
- chat_2k_sse.json   2,048 bytes: as chat_2k with "stream": true (the fake vLLM answers
                     it with a 50-event SSE stream).
Serialised like Python's json.dumps (", " and ": "), as the OpenAI Python SDK sends it.
"""
import base64
import json
import random
import sys

WORDS = ("the image shows a small red house next to a river with trees and a bridge "
         "describe every object you can see and say where it is in the picture").split()


def text(rng, n):
    out = []
    size = 0
    while size <= n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def chat(rng, user_len, stream=False):
    body = {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": "You are a careful assistant. Answer briefly."},
            {"role": "user", "content": text(rng, user_len)},
        ],
        "max_tokens": 64,
        "temperature": 0.7,
    }
    if stream:
        body["stream"] = True
    body["mm_processor_kwargs"] = {"num_crops": 4}
    return body


def sized(make, target):
    """Grows the variable part until the serialised body is exactly `target` bytes."""
    base = len(json.dumps(make(0)).encode())
    return json.dumps(make(target - base)).encode()


def image(rng, target):
    prefix = {
        "model": "tiny",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in this image? Describe it in one sentence."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}},
        ]}],
        "max_tokens": 64,
        "mm_processor_kwargs": {"num_crops": 4},
    }
    base = len(json.dumps(prefix).encode())
    b64_len = (target - base) // 4 * 4
    png = b"\x89PNG\r\n\x1a\n" + rng.randbytes(b64_len // 4 * 3 - 8)
    prefix["messages"][0]["content"][1]["image_url"]["url"] += base64.b64encode(png).decode()
    return json.dumps(prefix).encode()


def main():
    out = sys.argv[1]
    files = {
        "chat_2k.json": sized(lambda n: chat(random.Random(1), 1900 + n), 2048),
        "chat_2k_sse.json": sized(lambda n: chat(random.Random(1), 1900 + n, stream=True), 2048),
        "chat_1m_image.json": image(random.Random(2), 1 << 20),
    }
    for name, data in files.items():
        json.loads(data)
        with open(f"{out}/{name}", "wb") as f:
            f.write(data)
        print(f"{name} {len(data)}")


if __name__ == "__main__":
    main()
