#!/usr/bin/env python3
"""Generates src/contract/fields.rs: the plainly typed top-level fields of vLLM 0.31's request
models, per gated route, so mmgate can see pydantic type errors that vLLM raises before its gate.

Run with the vLLM 0.31 venv's python (see ../shared/oracle):
    VLLM_TARGET_DEVICE=cpu $VLLM_ORACLE_HOME/venv/bin/python tools/vllm_fields.py > src/contract/fields.rs

For a route whose body is a union of models there is one table per model: pydantic refuses
the body only when every model refuses it.
"""
import collections.abc
import importlib
import sys
import types
import typing

import pydantic
import typing_extensions

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
# Lists whose elements mmgate looks into: chat messages and chat tools.
SHAPED = {
    importlib.import_module("vllm.entrypoints.chat_utils").ChatCompletionMessageParam: "ChatMessages",
    importlib.import_module(
        "vllm.entrypoints.openai.chat_completion.protocol"
    ).ChatCompletionToolsParam: "ChatTools",
}
ORDER = ["Float", "Int", "Bool", "Str", "Bytes", "List", "Nested", "ChatMessages", "ChatRequestMessages", "ChatTools", "ChatBatches", "WordList",
         "TaggedList", "ContentList", "Tagged", "Content", "Dict", "DictOf", "DictOfDicts"]


def constraint(m):
    """Whether an `Annotated` metadata item only constrains the value (`Field(ge=...)`,
    `max_length`)."""
    import annotated_types

    if isinstance(m, pydantic.fields.FieldInfo):
        return all(isinstance(x, annotated_types.BaseMetadata) for x in m.metadata)
    return isinstance(m, annotated_types.BaseMetadata)


def constraints_only(a):
    """Whether an `Annotated` type only constrains its value: it then refuses every JSON
    kind its inner type refuses, and more values."""
    return all(constraint(m) for m in a.__metadata__)


def length_bounds(a):
    """The `min_length` and `max_length` (`None`: none) an `Annotated` type puts on its value."""
    import annotated_types

    lo, hi = 0, None
    for m in a.__metadata__:
        for x in getattr(m, "metadata", [m]):
            if isinstance(x, annotated_types.MinLen):
                lo = max(lo, x.min_length)
            elif isinstance(x, annotated_types.MaxLen):
                hi = x.max_length if hi is None else min(hi, x.max_length)
    return lo, hi


def constrained(info):
    """Whether a field's `Field(...)` constrains its value (`min_length`, `pattern` ...)."""
    import annotated_types

    length = (annotated_types.MinLen, annotated_types.MaxLen, annotated_types.Len)
    return any(
        isinstance(m, length) or getattr(m, "pattern", None) is not None for m in info.metadata
    )


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


# JSON kinds, as `inspect::KindSet` names them; NOT_INT: a number or string that pydantic's
# `int` refuses (`1.5`, `"a"`), which an element type other than `int` may accept; NOT_FLOAT:
# an integer too large for a float (`float()` of it overflows), which `int` accepts.
KINDS = ["NULL", "BOOL", "NUMBER", "NON_FINITE", "STR", "ARRAY", "OBJECT", "NOT_INT", "NOT_FLOAT"]
# Validators that vLLM 0.31 runs on list elements and that return a value of another kind than
# an object unchanged (read in its source): they leave the element's kind to its type.
PASS_THROUGH = {"__log_extra_fields__", "_default_input_image_details"}
# Values of each kind that an element type refusing the kind must refuse (checked below).
SAMPLES = {
    "NULL": [None],
    "BOOL": [True, False],
    "NUMBER": [0, 1, -1, 2, 1.0, 0.5, -1.5, 10**30, 1e300],
    "NON_FINITE": [float("nan"), float("inf"), float("-inf")],
    "STR": ["", "x", "0", "1", "1.5", "true", "user", "function"],
    "ARRAY": [[], [1], ["x"], [{}], [[1]]],
    "OBJECT": [{}, {"a": 1}, {"role": "user", "content": "x"}, {"type": "function", "function": {"name": "f"}}],
    "NOT_INT": [0.5, -1.5, 1e-5, "a", "1.5", "x", ""],
    "NOT_FLOAT": [2**1024, -(2**1024), 2**1024 - 2**970],
}


def accepts(x):
    """The JSON kinds of which pydantic's lax mode may accept a value as type `x` (the body
    is `json.loads` output): every kind when the type does not decide it."""
    import typing_extensions

    every = set(KINDS)
    o = typing.get_origin(x)
    if x is None or x is type(None):
        return {"NULL"}
    if o is typing.Annotated:
        return accepts(typing.get_args(x)[0]) if transparent(x) else every
    if o in (typing.Union, types.UnionType):
        return set().union(*(accepts(a) for a in typing.get_args(x)))
    if o is typing.Literal:
        return {"STR", "NOT_INT"} if all(isinstance(v, str) for v in typing.get_args(x)) else every
    if x is int:
        return {"BOOL", "NUMBER", "STR", "NOT_FLOAT"}
    if x is bool:
        return {"BOOL", "NUMBER", "STR", "NOT_INT"}
    if x is float:
        return {"BOOL", "NUMBER", "NON_FINITE", "STR", "NOT_INT"}
    if x in (str, bytes):
        return {"STR", "NOT_INT"}
    if (o or x) in (list, tuple, set, frozenset):
        return {"ARRAY"}
    # Validated lazily, when read; but only an iterable is taken: a string, a list, an object.
    if (o or x) is collections.abc.Iterable:
        return {"STR", "NOT_INT", "ARRAY", "OBJECT"}
    if (o or x) is dict or typing_extensions.is_typeddict(x):
        return {"OBJECT"}
    if isinstance(x, type) and issubclass(x, pydantic.BaseModel):
        raw = [
            n for n, d in x.__pydantic_decorators__.model_validators.items()
            if d.info.mode != "after" and n not in PASS_THROUGH
        ]
        return every if raw else {"OBJECT"}
    return every


def transparent(a):
    """Whether an `Annotated` element type accepts the kinds of its inner type: its metadata
    only constrain values, describe them for the OpenAI SDK (`PropertyInfo`, which pydantic
    ignores), or validate them with a pass-through validator."""

    def harmless(m):
        if type(m).__name__ == "PropertyInfo":
            return True
        if type(m).__name__ in ("BeforeValidator", "WrapValidator", "PlainValidator"):
            return getattr(m.func, "__name__", "") in PASS_THROUGH
        return constraint(m)

    return all(harmless(m) for m in a.__metadata__)


def checked(x, kinds):
    """`kinds` for element type `x`, after checking that pydantic refuses every sample value of
    the other kinds (a type it cannot build is taken as accepting every kind)."""
    if kinds == set(KINDS):
        return kinds
    try:
        adapter = pydantic.TypeAdapter(x)
    except Exception as e:  # an unresolved forward reference, say
        print(f"// note: {x} not checked ({e.__class__.__name__}); every kind kept", file=sys.stderr)
        return set(KINDS)
    for kind in KINDS:
        for v in SAMPLES[kind] if kind not in kinds else []:
            try:
                adapter.validate_python(v)
            except pydantic.ValidationError:
                continue
            raise SystemExit(f"{x} accepts {v!r}, of kind {kind} that `accepts` says it refuses")
    return kinds


def tags(x, filled=None, nested=False, single=False):
    """For a union of models and TypedDicts told apart by their `type` (`Literal` strings),
    with no before-validators: each type's words, whether it takes an object without a
    `type` or with a null one, and its other fields that are required (less those in
    `filled`, by word: keys a before-validator adds) or whose kinds are decided, with those
    kinds; else None."""
    if typing.get_origin(x) is typing.Annotated:
        if not transparent(x):
            return None
        x = typing.get_args(x)[0]
    if typing.get_origin(x) not in (typing.Union, types.UnionType):
        return None
    return model_tags(flatten(typing.get_args(x)), filled or {}, nested, single)


def flatten(members):
    """A union's members, nested unions (and their transparent `Annotated`) spread out."""
    out = []
    for m in members:
        if typing.get_origin(m) is typing.Annotated and transparent(m):
            m = typing.get_args(m)[0]
        if typing.get_origin(m) in (typing.Union, types.UnionType):
            out += flatten(typing.get_args(m))
        else:
            out.append(m)
    return out


def td_fields(td):
    """A TypedDict's fields: name -> (annotation without `Required`/`NotRequired`, required)."""
    hints = typing_extensions.get_type_hints(td, include_extras=True)
    out = {}
    for name, h in hints.items():
        o = typing_extensions.get_origin(h)
        if o is typing_extensions.Required:
            out[name] = (typing.get_args(h)[0], True)
        elif o is typing_extensions.NotRequired:
            out[name] = (typing.get_args(h)[0], False)
        else:
            out[name] = (h, name in td.__required_keys__)
    return out


# Keys a before-validator adds to a list element of a tagged object, by the element's
# `type` word (`_default_input_image_details`: an input image's `detail`;
# ResponsesRequest.input_item_parsing: an assistant message's output text's `annotations`).
PART_FILLED = {"input_image": {"detail"}, "output_text": {"annotations"}}


def element_tags(a):
    """For a field of type `list[X]` (or an optional one; not `Iterable`, which pydantic
    validates only when read), X a union of tagged types (unions only): their `tags`, else
    None."""
    args = typing.get_args(a) if typing.get_origin(a) in (typing.Union, types.UnionType) else (a,)
    non = [x for x in args if x is not type(None) and x is not str]
    if len(non) != 1:
        return None
    lst = non[0]
    if typing.get_origin(lst) is typing.Annotated and transparent(lst):
        lst = typing.get_args(lst)[0]
    if typing.get_origin(lst) is not list or len(typing.get_args(lst)) != 1:
        return None
    element = typing.get_args(lst)[0]
    found = tags(element, PART_FILLED, nested=True)
    return found or None


def model_tags(models, filled=None, nested=False, single=False):
    """`tags` of the union of these models and TypedDicts; unless `nested`, with the tags of
    their fields' lists of tagged objects and tagged objects (`parts`), and with `single`
    the fields of one model or TypedDict too (`single_tags`)."""
    out = []
    for m in models:
        tag = model_tag(m, filled, nested, single=single)
        if tag is None:
            return None
        if tag not in out:
            out.append(tag)
    return out


def model_tag(m, filled=None, nested=False, untyped=False, single=False):
    """One model's or TypedDict's tag (see `tags`), else None. `untyped`: a model that is no
    member of a union, which may have no `type` field (no words: its `type`, if any, is
    another member)."""
    if typing_extensions.is_typeddict(m):
        fields = td_fields(m)
        if "type" not in fields and not untyped:
            return None
        ann, tag_required = fields.get("type", (None, False))
        typed = [(n, a, r) for n, (a, r) in fields.items() if n != "type"]
    elif isinstance(m, type) and issubclass(m, pydantic.BaseModel):
        validators = m.__pydantic_decorators__.model_validators.items()
        if any(d.info.mode != "after" and n not in PASS_THROUGH for n, d in validators):
            return None
        t = m.model_fields.get("type")
        if t is None and not untyped:
            return None
        ann, tag_required = (t.annotation, t.is_required()) if t else (None, False)
        typed = [
            (f.alias or n, object if validated(m, n, f) else f.annotation, f.is_required())
            for n, f in m.model_fields.items() if n != "type"
        ]
    else:
        return None
    if ann is None:
        words, null = (), False
    else:
        words = [a for a in (typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else [ann])]
        null = type(None) in words
        words = [w for w in words if w is not type(None)]
        if len(words) != 1 or typing.get_origin(words[0]) is not typing.Literal:
            return None
        words = typing.get_args(words[0])
        if not words or not all(isinstance(w, str) for w in words):
            return None
    declared = typed
    # By word, or by word and model for a validator that builds one model of its union.
    gone = set().union(*((filled or {}).get(k, set()) for w in words for k in (w, (w, m.__name__))))
    # Each field the kinds of its value decide, or that is required (unless filled in),
    # with the words a string must be when it is a `Literal` of strings.
    typed = tuple(
        (n, kinds_expr(kinds), r and n not in gone, literal_words(a), scalar(a))
        for n, a, r in typed
        for kinds in [checked(a, accepts(a))]
        if (r and n not in gone) or kinds != set(KINDS)
    )
    listed = () if nested else tuple(
        (n, p)
        for n, a, _ in declared
        for p in [element_tags(a) or object_tags(a) or (single and single_tags(a))]
        if p
    )
    return (tuple(words), not tag_required, null, typed, listed)


def object_tags(a):
    """For a field whose type is a union of tagged types (or an optional one), read one
    level down as a list of one: their `tags`, else None."""
    # The union's members (through `Annotated` and nested unions) without `None`: null is
    # the field's kinds' concern.
    members = [m for m in flatten([a]) if m is not type(None)]
    if len(members) < 2:
        return None
    return model_tags(members, PART_FILLED, nested=True) or None


def single_tags(a):
    """For a field whose type is one TypedDict or model (or an optional one; a score content
    part's `image_url`, `video_url`, `prompt_cache_breakpoint`), read one level down as a
    list of one: its tag (no words: any `type` is another member), else None."""
    members = [m for m in flatten([a]) if m is not type(None)]
    if len(members) != 1:
        return None
    tag = model_tag(members[0], PART_FILLED, nested=True, untyped=True)
    return [tag] if tag else None


def scalar(a):
    """`ScalarTy::Bool` or `Int` for a field of exactly that type (or an optional one), whose
    strings and numbers pydantic's lax mode reads as such; else `ScalarTy::Any` (no tagged
    object of vLLM 0.31 has a `float` field)."""
    args = typing.get_args(a) if typing.get_origin(a) in (typing.Union, types.UnionType) else (a,)
    non = [x for x in args if x is not type(None)]
    if len(non) == 1 and non[0] in (bool, int):
        return "ScalarTy::" + non[0].__name__.capitalize()
    return "ScalarTy::Any"


def literal_words(a):
    """The words of a `Literal` of strings (or of an optional one), else ()."""
    args = typing.get_args(a) if typing.get_origin(a) in (typing.Union, types.UnionType) else (a,)
    non = [x for x in args if x is not type(None)]
    if len(non) == 1 and typing.get_origin(non[0]) is typing.Literal:
        words = typing.get_args(non[0])
        if all(isinstance(w, str) for w in words):
            return tuple(words)
    return ()


def content_tags(x):
    """For a TypedDict whose one required field is a `content` list of tagged types (a score
    input's `ScoreMultiModalParam`): those types' `tags`; else None."""
    if not typing_extensions.is_typeddict(x):
        return None
    fields = td_fields(x)
    if [n for n, (_, r) in fields.items() if r] != ["content"]:
        return None
    ann = fields["content"][0]
    if typing.get_origin(ann) is not list:
        return None
    return tags(typing.get_args(ann)[0], single=True)


def tags_expr(variant, tags):
    return variant + "(" + tag_list(tags) + ")"


def tag_list(tags):
    strs = lambda xs: "&[" + ", ".join(f'"{x}"' for x in xs) + "]"
    return "&[" + ", ".join(
        f"Tag {{ words: {strs(w)}, omitted: {str(o).lower()}, null: {str(n).lower()}, fields: &["
        + ", ".join(
            f'("{name}", {kinds}, {str(req).lower()}, {strs(words)}, {sc})'
            for name, kinds, req, words, sc in r
        ) + "], parts: &["
        + ", ".join(f'("{name}", {tag_list(p)})' for name, p in listed)
        + "] }"
        for w, o, n, r, listed in tags
    ) + "]"


def kinds_expr(kinds):
    if kinds == set(KINDS):
        return "KindSet::ANY"
    first, *rest = [k for k in KINDS if k in kinds]
    return f"KindSet::{first}" + "".join(f".or(KindSet::{k})" for k in rest)


def simple(ann, filled=None, field_length=(0, None)):
    """The JSON-level types a field accepts (`None` when some of them cannot be told from
    the JSON kind alone), and whether it accepts null. A `Literal` of strings is a string
    equal to one of them. `filled`: keys a before-validator adds to tagged list elements, by
    `type` word. `field_length`: the field's own `min_length` and `max_length` (`Field(...)`),
    which only lists of conversations have (one conversation at least)."""
    args = [ann]
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = list(typing.get_args(ann))
    non = [a for a in args if a is not type(None)]
    nullable = len(non) < len(args)
    tys = []
    words = []
    lists = []  # per list type of the union, the kinds its elements may have
    models = []  # the union's models
    for a in non:
        length = (0, None)  # a list type's `min_length` and `max_length`
        if typing.get_origin(a) is typing.Annotated:
            if not constraints_only(a):
                return None, nullable
            length = length_bounds(a)
            a = typing.get_args(a)[0]
        if typing.get_origin(a) is typing.Literal:
            values = typing.get_args(a)
            if not all(isinstance(v, str) for v in values):
                return None, nullable
            words += [v for v in values if v not in words]
            continue
        ty = TY.get(typing.get_origin(a) or a)
        if typing.get_origin(a) is collections.abc.Sequence:
            ty = "List"  # pydantic refuses a string or an object for a `Sequence`
        values = typing.get_args(a)[1:] if typing.get_origin(a) is dict else ()
        if values and (typing.get_origin(values[0]) or values[0]) is dict:
            ty = "DictOfDicts"  # an object whose every value is an object
        elif values and checked(values[0], accepts(values[0])) != set(KINDS):
            ty = f"DictOf({kinds_expr(checked(values[0], accepts(values[0])))})"
        if ty is None and isinstance(a, type) and issubclass(a, pydantic.BaseModel):
            models.append(a)  # from JSON, a model is read from an object only
            continue
        if ty is None and typing_extensions.is_typeddict(a):
            parts = content_tags(a)
            if parts:
                # A score input object: `Ty::Content`.
                tys.append(tags_expr("Content", parts))
                continue
            ty = "Dict"
        if ty is None:
            return None, nullable
        element = typing.get_args(a)[0] if ty == "List" and len(typing.get_args(a)) == 1 else None
        shaped = SHAPED.get(element) if element is not None else None
        if shaped and length == (0, None):
            if shaped not in tys:
                tys.append(shaped)
            continue
        conversation = element
        if typing.get_origin(conversation) is typing.Annotated and constraints_only(conversation):
            conversation = typing.get_args(conversation)[0]
        inner = typing.get_args(conversation)[0] if typing.get_origin(conversation) is list else None
        if inner is not None and SHAPED.get(inner) == "ChatMessages" and length == (0, None):
            # A list of conversations, each with one message at least: `Ty::ChatBatches`.
            bounds = length_bounds(element) if conversation is not element else (0, None)
            if bounds != (1, None) or field_length != (1, None):
                raise SystemExit(f"{ann}: conversations, or lists of them, of other lengths than 1 and more")
            tys.append("ChatBatches")
            continue
        tagged = tags(element, filled) if element is not None else None
        if tagged and length == (0, None):
            # A list of tagged objects (the Responses API's tools and input items).
            tys.append(tags_expr("TaggedList", tagged))
            continue
        union = flatten([element]) if element is not None else []
        parts = [content_tags(u) for u in union if u is not str]
        if union and str in union and len(parts) == 1 and parts[0] and length == (0, None):
            # A list of score inputs (strings and content objects): `Ty::ContentList`.
            tys.append(tags_expr("ContentList", parts[0]))
            continue
        if typing.get_origin(element) is typing.Literal and length == (0, None):
            values = typing.get_args(element)
            if all(isinstance(v, str) for v in values):
                # A list of `Literal` strings: `Ty::WordList` (read for `include`).
                tys.append("WordList(&[" + ", ".join(f'"{v}"' for v in values) + "])")
                continue
        inner_args = typing.get_args(element) if typing.get_origin(element) in (list, dict) else ()
        if len(inner_args) in (1, 2) and length == (0, None):
            # A list of lists (token ids) or of objects of plain values: `Ty::Nested`.
            leaf = inner_args[-1]
            outer = "KindSet::ARRAY" if typing.get_origin(element) is list else "KindSet::OBJECT"
            kinds = checked(leaf, accepts(leaf))
            if kinds != set(KINDS):
                tys.append(f"Nested({outer}, {kinds_expr(kinds)})")
                continue
        if ty == "List":
            if field_length != (0, None):
                raise SystemExit(f"{ann}: a field-level length on a list the table cannot bound")
            args = typing.get_args(a)
            kinds = checked(args[0], accepts(args[0])) if args else set(KINDS)
            if (kinds, length) not in lists:
                lists.append((kinds, length))
            continue
        if ty not in tys:
            tys.append(ty)
    # Models told apart by their `type` are `Ty::Tagged`, and so is one model alone (its
    # tag without words); other models any object (`Dict`).
    tagged = model_tags(models) if models and "Dict" not in tys else None
    if not tagged and len(models) == 1 and "Dict" not in tys:
        tag = model_tag(models[0], untyped=True)
        tagged = [tag] if tag else None
    if tagged:
        tys.append(tags_expr("Tagged", tagged))
    elif models and "Dict" not in tys:
        tys.append("Dict")
    # One entry per list type: a list is refused when no list type takes all its elements.
    for kinds, (lo, hi) in lists:
        hi = "usize::MAX" if hi is None else hi
        tys.append(f"List({kinds_expr(kinds)}, {lo}, {hi})")
    if words and "Str" not in tys:
        tys.append("Literal(&[" + ", ".join(f'"{w}"' for w in words) + "])")
    base = lambda t: t.split("(")[0]
    key = lambda t: ORDER.index(base(t)) if base(t) in ORDER else ORDER.index("Str") + 0.5
    return (sorted(tys, key=key) or None), nullable


# Fields a model's before-validator fills in from another member when that one is a list
# (normalize_input_messages: `messages` from chat messages in `input`).
FILLED = {
    "EmbeddingChatInputRequest": {"messages": "input"},
    "EmbeddingBatchChatInputRequest": {"messages": "input"},
}
# Fields a before-validator makes a list with `list(value)` when they are neither a list nor
# a string (ResponsesRequest.input_item_parsing): an object becomes the list of its keys, so
# `{}` is taken as `[]`, and a non-empty object only where the list takes strings.
LISTED = {"ResponsesRequest": {"input"}}
# Keys a before-validator adds to list elements of a `type`, by (model, field) and word
# or (word, model) (ResponsesRequest.input_item_parsing: a reasoning item gets an `id` when
# it has none; an assistant message with a content list an `id` and a `status` as it is
# made a ResponseOutputMessage, which only that model sees).
ADDED = {("ResponsesRequest", "input"): {
    "reasoning": {"id"},
    ("message", "ResponseOutputMessage"): {"id", "status"},
}}
# The before-validators (`model_validator(mode="before")`) whose refusals mmgate's
# `types::Check` reproduces, by (model, validator); the others only ever refuse more.
CHECKS = {
    "validate_stream_options": "StreamOptions",
    "check_generation_prompt": "GenerationPrompt",
    "validate_prompt_and_prompt_embeds": "PromptOrEmbeds",
    "check_batch_mode": "BatchMode",
    "check_cache_salt_support": "CacheSalt",
    "validate_background": "Background",
    "validate_response_format": "ResponseFormat",
    "check_structured_outputs_count": "StructuredOutputs",
}
CLASS_CHECKS = {
    ("ChatCompletionRequest", "check_logprobs"): "ChatLogprobs",
    ("CompletionRequest", "check_logprobs"): "CompletionLogprobs",
    ("ResponsesRequest", "validate_prompt"): "ResponsesPrompt",
    ("ChatCompletionRequest", "check_tool_usage"): "ChatToolUsage",
    ("ResponsesRequest", "check_tool_usage"): "ResponsesToolUsage",
    # The completion request's version counts the constraints only (no tool_choice clause).
    ("CompletionRequest", "check_structured_outputs_count"): "StructuredOutputsCount",
}
# (The batch route then validates each conversation as a ChatCompletionRequest: mmgate runs
# that model's checks on the request it rebuilds, `types::batch_rebuilt`.)


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
    return sorted({c for c in out if c})


# Fields with a validator of their own that refuses at least what their type refuses
# (checked by hand against vLLM 0.31): their plain type stays certain.
STRICTER = {"thinking_token_budget"}
# Of those, fields whose validator takes only a Python int as json.loads made it (no bool,
# float or string), within inclusive bounds (validate_thinking_token_budget: -1 or above).
JSON_INT = {"thinking_token_budget": (-1, 2**127 - 1)}


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
        import annotated_types
        lengths = [m for m in info.metadata if isinstance(m, (annotated_types.MinLen, annotated_types.MaxLen))]
        field_length = length_bounds(typing.Annotated[object, *lengths]) if lengths else (0, None)
        tys, nullable = simple(info.annotation, ADDED.get((model.__name__, name)), field_length)
        if tys and name in LISTED.get(model.__name__, ()):
            lists = [t for t in tys if t.startswith(("List(", "TaggedList("))]
            if lists and "Dict" not in tys:
                # A list of tagged objects takes no string, as a list of objects.
                plain = lists[0].startswith("List(")
                keys = plain and ("KindSet::STR" in lists[0] or "ANY" in lists[0])
                tys.append("Dict" if keys else "EmptyDict")
        if tys and "Str" in tys and constrained(info):
            # pydantic reads a constrained `str` (`min_length` ...) as Rust text, which a lone
            # surrogate cannot be: it refuses what `bytes` refuses.
            tys[tys.index("Str")] = "Bytes"
        if name in SKIP:
            continue
        if tys and "ChatMessages" in tys and "_normalize_messages_before" in model.__pydantic_decorators__.model_validators:
            # ChatCompletionRequest's before-validator (so named in vLLM 0.31) reshapes each
            # message first: src/inspect/message.rs reads messages both ways.
            tys[tys.index("ChatMessages")] = "ChatRequestMessages"
        if name in JSON_INT:
            out[name] = (["JsonInt"], nullable, info.is_required(), filled.get(name, ""), JSON_INT[name])
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
print("use super::types::{Check, FieldTy, ModelTy, ScalarTy, Tag, Ty};")
print("use crate::inspect::KindSet;\n")
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
