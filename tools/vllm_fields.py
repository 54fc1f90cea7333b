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
# JSON gives pydantic only a string for `bytes` (which must encode as UTF-8).
TY = {float: "Float", int: "Int", bool: "Bool", str: "Str", bytes: "Bytes", list: "List", dict: "Dict"}
ORDER = ["Float", "Int", "Bool", "Str", "Bytes", "List", "Dict", "DictOfDicts"]


def constraints_only(a):
    """Whether an `Annotated` type only constrains its value (`Field(ge=...)`,
    `max_length`): it then refuses every JSON kind its inner type refuses, and more values."""
    import annotated_types

    def plain(m):
        if isinstance(m, pydantic.fields.FieldInfo):
            return all(isinstance(x, annotated_types.BaseMetadata) for x in m.metadata)
        return isinstance(m, annotated_types.BaseMetadata)

    return all(plain(m) for m in a.__metadata__)


def bounds(info, ann):
    """Inclusive integer bounds (`Field(ge=..., le=...)` on the field or in its `Annotated`
    type) of a field whose one non-null type is `int` or `float`; `None` without bounds or
    with others (`gt`, a fractional bound) that the table does not express."""
    import annotated_types

    metadata = list(info.metadata)
    args = list(typing.get_args(ann)) if typing.get_origin(ann) in (typing.Union, types.UnionType) else [ann]
    non = [a for a in args if a is not type(None)]
    if len(non) != 1:
        return None
    a = non[0]
    if typing.get_origin(a) is typing.Annotated:
        for m in a.__metadata__:
            metadata += list(getattr(m, "metadata", [m]))
        a = typing.get_args(a)[0]
    if a not in (int, float):
        return None
    lo, hi = None, None
    for m in metadata:
        if isinstance(m, annotated_types.Ge) and float(m.ge).is_integer():
            lo = int(m.ge)
        elif isinstance(m, annotated_types.Le) and float(m.le).is_integer():
            hi = int(m.le)
        elif isinstance(m, annotated_types.BaseMetadata):
            return None
    if lo is None and hi is None:
        return None
    return (lo if lo is not None else -(2**127), hi if hi is not None else 2**127 - 1)


def simple(ann):
    """The JSON-level types a field accepts (`None` when some of them cannot be told from
    the JSON kind alone), and whether it accepts null. A `Literal` of strings is a string
    equal to one of them."""
    args = [ann]
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = list(typing.get_args(ann))
    non = [a for a in args if a is not type(None)]
    nullable = len(non) < len(args)
    tys = []
    words = []
    for a in non:
        if typing.get_origin(a) is typing.Annotated:
            if not constraints_only(a):
                return None, nullable
            a = typing.get_args(a)[0]
        if typing.get_origin(a) is typing.Literal:
            values = typing.get_args(a)
            if not all(isinstance(v, str) for v in values):
                return None, nullable
            words += [v for v in values if v not in words]
            continue
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
    if words and "Str" not in tys:
        tys.append("Literal(&[" + ", ".join(f'"{w}"' for w in words) + "])")
    key = lambda t: ORDER.index(t) if t in ORDER else ORDER.index("Str") + 0.5
    return (sorted(tys, key=key) or None), nullable


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


# Fields with a validator of their own that refuses at least what their type refuses
# (checked by hand against vLLM 0.31): their plain type stays certain.
STRICTER = {"thinking_token_budget"}  # validate_thinking_token_budget: ints >= -1 only


def validated(model, name, info):
    """Whether a field has a validator that runs on the raw value (before, wrap or plain):
    it may accept what the plain type refuses, so the type is not certain."""
    decorators = model.__pydantic_decorators__.field_validators.values()
    if any(name in d.info.fields and d.info.mode != "after" for d in decorators):
        return True
    kinds = ("BeforeValidator", "WrapValidator", "PlainValidator")
    return any(type(m).__name__ in kinds for m in info.metadata)


def fields(path):
    model = model_of(path)
    filled = FILLED.get(model.__name__, {})
    out = {}
    for name, info in model.model_fields.items():
        if validated(model, name, info) and name not in STRICTER:
            if info.is_required():
                out[info.alias or name] = ([], True, True, filled.get(name, ""), None)
            continue
        name = info.alias or name
        tys, nullable = simple(info.annotation)
        if name in SKIP:
            continue
        if tys:
            out[name] = (tys, nullable, info.is_required(), filled.get(name, ""), bounds(info, info.annotation))
        elif info.is_required():
            # Of a type the JSON kind does not decide: only its absence is certain.
            out[name] = ([], True, True, filled.get(name, ""), None)
    return out


print("//! Generated by `tools/vllm_fields.py` from vLLM 0.31.0's pydantic request models; do not edit.")
print("//! Per route, one entry per model its body may validate as (pydantic tries each): the")
print("//! before-validators mmgate reproduces, the top-level fields whose JSON types are plain")
print("//! (`str`, `int`, `list[...]`, unions of them), and the required fields of other types")
print("//! (`tys: &[]`: only their absence is certain); `range`: the inclusive bounds of a")
print("//! number field (`Field(ge=..., le=...)`).\n")
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
        for name, (tys, nullable, required, filled_from, range_) in sorted(fields(p).items()):
            ty = ", ".join(f"Ty::{t}" for t in tys)
            if range_:
                lo = "i128::MIN" if range_[0] == -(2**127) else range_[0]
                hi = "i128::MAX" if range_[1] == 2**127 - 1 else range_[1]
                range_ = f"Some(({lo}, {hi}))"
            else:
                range_ = "None"
            print(f'            FieldTy {{ name: "{name}", tys: &[{ty}], nullable: {str(nullable).lower()}, required: {str(required).lower()}, filled_from: "{filled_from}", range: {range_} }},')
        print("        ],")
        print("    },")
    print("];\n")
