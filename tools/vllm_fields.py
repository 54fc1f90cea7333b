#!/usr/bin/env python3
"""Generates src/contract/fields.rs: the plainly typed top-level fields of vLLM 0.31's request
models, per gated route, so mmgate can see pydantic type errors that vLLM raises before its gate.

Run with the vLLM 0.31 venv's python (see ../shared/oracle):
    VLLM_TARGET_DEVICE=cpu $VLLM_ORACLE_HOME/venv/bin/python tools/vllm_fields.py > src/contract/fields.rs

For a route whose body is a union of models there is one table per model: pydantic refuses
the body only when every model refuses it.
"""
import importlib
import types
import typing

import pydantic

MODELS = {
    "CHAT": ["openai.chat_completion.protocol:ChatCompletionRequest"],
    "CHAT_BATCH": ["openai.chat_completion.protocol:BatchChatCompletionRequest"],
    "COMPLETION": ["openai.completion.protocol:CompletionRequest"],
    "RESPONSES": ["openai.responses.protocol:ResponsesRequest"],
    "TOKENIZE": ["serve.tokenize.protocol:TokenizeCompletionRequest", "serve.tokenize.protocol:TokenizeChatRequest"],
    "EMBEDDINGS": [
        "pooling.embed.protocol:EmbeddingCompletionRequest",
        "pooling.embed.protocol:EmbeddingChatRequest",
        "pooling.embed.protocol:EmbeddingBatchChatRequest",
        "pooling.embed.protocol:EmbeddingChatInputRequest",
        "pooling.embed.protocol:EmbeddingBatchChatInputRequest",
    ],
    "POOLING": ["pooling.pooling.protocol:PoolingCompletionRequest", "pooling.pooling.protocol:PoolingChatRequest",
                "pooling.pooling.protocol:IOProcessorRequest"],
    "SCORE": ["pooling.scoring.protocol:ScoreQueriesDocumentsRequest", "pooling.scoring.protocol:ScoreQueriesItemsRequest",
              "pooling.scoring.protocol:ScoreDataRequest", "pooling.scoring.protocol:ScoreTextRequest"],
    "RERANK": ["pooling.scoring.protocol:RerankRequest"],
    "CLASSIFY": ["pooling.classify.protocol:ClassificationCompletionRequest",
                 "pooling.classify.protocol:ClassificationChatRequest"],
}
# Handled by mmgate's own rules (the gated fields, the model check).
SKIP = {"model"}
# JSON gives pydantic only a string for `bytes`.
TY = {float: "Float", int: "Int", bool: "Bool", str: "Str", bytes: "Str", list: "List", dict: "Dict"}
ORDER = ["Float", "Int", "Bool", "Str", "List", "Dict", "DictOfDicts"]


def simple(ann):
    """The JSON-level types a field accepts (`None` when some of them cannot be told from
    the JSON kind alone), and whether it accepts null."""
    args = [ann]
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = list(typing.get_args(ann))
    non = [a for a in args if a is not type(None)]
    nullable = len(non) < len(args)
    tys = []
    for a in non:
        if typing.get_origin(a) is typing.Annotated:
            return None, nullable
        ty = TY.get(typing.get_origin(a) or a)
        values = typing.get_args(a)[1:] if typing.get_origin(a) is dict else ()
        if values and (typing.get_origin(values[0]) or values[0]) is dict:
            ty = "DictOfDicts"  # an object whose every value is an object
        if ty is None and isinstance(a, type) and issubclass(a, pydantic.BaseModel):
            ty = "Dict"  # from JSON, a model is read from an object only
        if ty is None:
            return None, nullable
        if ty not in tys:
            tys.append(ty)
    return (sorted(tys, key=ORDER.index) or None), nullable


# Fields a model's before-validator fills in from another member when that one is a list
# (normalize_input_messages: `messages` from chat messages in `input`).
FILLED = {
    "EmbeddingChatInputRequest": {"messages": "input"},
    "EmbeddingBatchChatInputRequest": {"messages": "input"},
}
# The before-validators (`model_validator(mode="before")`) whose refusals mmgate's
# `types::Check` reproduces, by (model, validator); the others only ever refuse more.
CHECKS = {
    "validate_stream_options": "StreamOptions",
    "check_generation_prompt": "GenerationPrompt",
    "validate_prompt_and_prompt_embeds": "PromptOrEmbeds",
    "check_batch_mode": "BatchMode",
}
CLASS_CHECKS = {
    ("ChatCompletionRequest", "check_logprobs"): "ChatLogprobs",
    ("CompletionRequest", "check_logprobs"): "CompletionLogprobs",
    ("ResponsesRequest", "validate_prompt"): "ResponsesPrompt",
}
# The batch route validates each conversation as a ChatCompletionRequest before its gate.
EXTRA_CHECKS = {"BatchChatCompletionRequest": ["StreamOptions"]}


def model_of(path):
    mod, cls = path.split(":")
    return getattr(importlib.import_module("vllm.entrypoints." + mod), cls)


def checks(model):
    names = model.__pydantic_decorators__.model_validators
    out = [
        CLASS_CHECKS.get((model.__name__, n)) or CHECKS.get(n)
        for n, d in sorted(names.items())
        if d.info.mode == "before"
    ]
    out += EXTRA_CHECKS.get(model.__name__, [])
    return sorted({c for c in out if c})


def fields(path):
    model = model_of(path)
    filled = FILLED.get(model.__name__, {})
    out = {}
    for name, info in model.model_fields.items():
        name = info.alias or name
        tys, nullable = simple(info.annotation)
        if name in SKIP:
            continue
        if tys:
            out[name] = (tys, nullable, info.is_required(), filled.get(name, ""))
        elif info.is_required():
            # Of a type the JSON kind does not decide: only its absence is certain.
            out[name] = ([], True, True, filled.get(name, ""))
    return out


print("//! Generated by `tools/vllm_fields.py` from vLLM 0.31.0's pydantic request models; do not edit.")
print("//! Per route, one entry per model its body may validate as (pydantic tries each): the")
print("//! before-validators mmgate reproduces, the top-level fields whose JSON types are plain")
print("//! (`str`, `int`, `list[...]`, unions of them), and the required fields of other types")
print("//! (`tys: &[]`: only their absence is certain).\n")
print("use super::types::{Check, FieldTy, ModelTy, Ty};\n")
for const, paths in MODELS.items():
    print("#[rustfmt::skip]")
    print(f"pub(super) const {const}: &[ModelTy] = &[")
    for p in paths:
        model = model_of(p)
        print("    ModelTy {")
        print(f'        name: "{model.__name__}",')
        print("        checks: &[" + ", ".join(f"Check::{c}" for c in checks(model)) + "],")
        print("        fields: &[")
        for name, (tys, nullable, required, filled_from) in sorted(fields(p).items()):
            ty = ", ".join(f"Ty::{t}" for t in tys)
            print(f'            FieldTy {{ name: "{name}", tys: &[{ty}], nullable: {str(nullable).lower()}, required: {str(required).lower()}, filled_from: "{filled_from}" }},')
        print("        ],")
        print("    },")
    print("];\n")
