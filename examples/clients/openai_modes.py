"""What an OpenAI Python SDK client sees through mmgate, mode by mode.

The same chat request carrying per-request ``mm_processor_kwargs`` (sent with
``extra_body``, as clients of vLLM 0.30 do) goes through the gateway once per mode. The
compose example's policy (examples/compose/mmgate/policy.toml) gives each mode its own API
key, so one gateway shows all of them:

    cd examples/compose && docker compose up --build -d
    python3 examples/clients/openai_modes.py --base-url http://127.0.0.1:8080/v1 --check

Against your own gateway, pass the keys your policy lists (``--strip-key`` and friends).
``--check`` exits 1 when a mode does not answer as described below (tests/examples.rs runs
it that way against the real binary). Requires ``pip install openai``.

What the client sees:

* shadow (and pass): the request is forwarded exactly as sent and succeeds as it did with
  vLLM 0.30; mmgate only counts and logs it. After the upgrade to 0.31 the same request
  would get vLLM's 400, which is why shadow runs in front of 0.30.
* strip: it succeeds; the offending fields were removed (vLLM applied its deployment
  defaults) and the response header ``x-mmgate-stripped`` names them.
* reject: ``openai.BadRequestError`` (400) with vLLM 0.31's own error body: ``e.param`` is
  the field, ``e.message`` vLLM's text. The upstream never saw the request.
* route (a trusted client): it succeeds, served as sent by the deployment started with
  ``--trust-request-mm-kwargs``; a value outside the pool's bounds is a 400 from mmgate
  whose message names the key and the bound.

Other answers from mmgate use the same envelope: 401 ``AuthenticationError`` (unknown key
with ``identity.unknown = "reject"``), 413, 429 ``RateLimitError`` and 503 with
``Retry-After``, 502/504 when vLLM fails. The SDK retries 429 and 5xx by itself
(``max_retries``, default 2, honouring ``Retry-After``); this script sets it to 0 to show
the first answer.
"""

import argparse
import sys

import openai
from openai import OpenAI

KWARGS = {"mm_processor_kwargs": {"max_pixels": 802816}}
TOO_BIG = {"mm_processor_kwargs": {"max_pixels": 4014080}}


def ask(base_url, key, model, extra_body):
    """Sends one chat request; returns (status, stripped header, error param, text)."""
    client = OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=30)
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=model,
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=16,
            extra_body=extra_body,
        )
    except openai.APIStatusError as e:
        return e.status_code, None, e.param, e.message
    completion = raw.parse()
    text = completion.choices[0].message.content or ""
    return raw.status_code, raw.headers.get("x-mmgate-stripped"), None, text


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    p.add_argument("--model", help="default: the first model /v1/models lists")
    p.add_argument("--anonymous-key", default="no-key", help="a key the policy does not know")
    p.add_argument("--strip-key", default="sk-legacy-example")
    p.add_argument("--reject-key", default="sk-batch-example")
    p.add_argument("--route-key", default="sk-vision-example")
    p.add_argument("--check", action="store_true", help="exit 1 unless every mode answers as documented")
    a = p.parse_args()

    model = a.model or OpenAI(base_url=a.base_url, api_key=a.anonymous_key).models.list().data[0].id

    # (what, key, body, expected status, expected x-mmgate-stripped, expected error param)
    cases = [
        ("shadow: anonymous, forwarded as sent", a.anonymous_key, KWARGS, 200, None, None),
        ("strip: fields removed", a.strip_key, KWARGS, 200, "mm_processor_kwargs", None),
        ("reject: vLLM 0.31's 400", a.reject_key, KWARGS, 400, None, "mm_processor_kwargs"),
        ("route: trusted pool, as sent", a.route_key, KWARGS, 200, None, None),
        ("route: value outside the bound", a.route_key, TOO_BIG, 400, None, "mm_processor_kwargs"),
        ("any mode: no kwargs", a.reject_key, None, 200, None, None),
    ]
    failed = 0
    for what, key, body, status, stripped, param in cases:
        got = ask(a.base_url, key, model, body)
        ok = got[:3] == (status, stripped, param)
        failed += not ok
        print(f"{'ok ' if ok else 'BAD'} {what:34} -> {got[0]}"
              f"  x-mmgate-stripped={got[1]}  param={got[2]}  {got[3][:90]!r}")
        if not ok:
            print(f"    expected {status}, x-mmgate-stripped={stripped}, param={param}")
    if a.check and failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
