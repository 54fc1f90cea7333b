"""The OpenAI Python SDK through mmgate: what a real client sees in reject and strip mode.

usage: openai_client.py REJECT_BASE STRIP_BASE UNTRUSTED_VLLM_BASE   (each ending in /v1)
Exits non-zero on the first failed expectation.
"""
import sys

import openai

reject_base, strip_base, vllm_base = sys.argv[1:4]
kwargs = {"mm_processor_kwargs": {"max_pixels": 1003520}}
messages = [{"role": "user", "content": "Hello"}]


def client(base):
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)


def gate_error(base):
    try:
        client(base).chat.completions.create(model="tiny", messages=messages, max_tokens=4, extra_body=kwargs)
    except openai.BadRequestError as e:
        return e
    raise AssertionError(f"{base}: expected BadRequestError")


direct = gate_error(vllm_base)
through = gate_error(reject_base)
assert through.status_code == 400 == direct.status_code
assert str(through) == str(direct), (str(through), str(direct))
assert through.body == direct.body, (through.body, direct.body)
print("reject: BadRequestError identical to vLLM's:", through.body["message"][:60], "...")

done = client(strip_base).chat.completions.with_raw_response.create(
    model="tiny", messages=messages, max_tokens=4, extra_body=kwargs
)
assert done.headers.get("x-mmgate-stripped") == "mm_processor_kwargs", dict(done.headers)
completion = done.parse()
assert completion.choices and completion.choices[0].message is not None
print("strip: completion", completion.id, "finish_reason", completion.choices[0].finish_reason)

events = list(
    client(strip_base).chat.completions.create(
        model="tiny", messages=messages, max_tokens=8, stream=True, extra_body=kwargs
    )
)
assert len(events) >= 2 and events[0].choices is not None
print("strip: streamed", len(events), "chunks")

try:
    list(client(reject_base).chat.completions.create(
        model="tiny", messages=messages, max_tokens=8, stream=True, extra_body=kwargs))
    raise AssertionError("stream in reject mode was not refused")
except openai.BadRequestError as e:
    assert e.body == direct.body
print("reject: stream request refused with the same error")
