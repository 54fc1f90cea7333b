//! The matrix the probe sends: the gated routes with a benign body shape each, and the six
//! kwargs cases.

use serde_json::{json, Value};

/// The body shape of a route's benign request.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Shape {
    Chat,
    ChatImage,
    Batch,
    Completion,
    Responses,
    Tokenize,
    Input,
    Score,
    Rerank,
}

/// The probed routes: name, path, body shape (`chat` twice: text, and text with an image).
pub(super) const ROUTES: &[(&str, &str, Shape)] = &[
    ("chat", "/v1/chat/completions", Shape::Chat),
    ("chat+image", "/v1/chat/completions", Shape::ChatImage),
    ("chat_batch", "/v1/chat/completions/batch", Shape::Batch),
    ("completions", "/v1/completions", Shape::Completion),
    ("responses", "/v1/responses", Shape::Responses),
    ("tokenize", "/tokenize", Shape::Tokenize),
    ("embeddings", "/v1/embeddings", Shape::Input),
    ("pooling", "/pooling", Shape::Input),
    ("score", "/score", Shape::Score),
    ("score", "/v1/score", Shape::Score),
    ("rerank", "/rerank", Shape::Rerank),
    ("rerank", "/v1/rerank", Shape::Rerank),
    ("rerank", "/v2/rerank", Shape::Rerank),
    ("classify", "/classify", Shape::Input),
    ("chat_render", "/v1/chat/completions/render", Shape::Chat),
    (
        "completions_render",
        "/v1/completions/render",
        Shape::Completion,
    ),
    ("responses_render", "/v1/responses/render", Shape::Responses),
    ("invocations", "/invocations", Shape::Chat),
];

const MM: &str = r#"{"max_pixels":1003520}"#;
const IO: &str = r#"{"video":{"num_frames":4}}"#;

/// The six cases: name, extra members, the field an untrusted vLLM names.
pub(super) const CASES: [(&str, &str, Option<&str>); 6] = [
    ("none", "", None),
    ("mm_processor_kwargs", "mm", Some("mm_processor_kwargs")),
    ("media_io_kwargs", "io", Some("media_io_kwargs")),
    ("both", "both", Some("mm_processor_kwargs")),
    ("null", "null", None),
    ("{}", "empty", None),
];

/// The benign request body for a route shape and case (`""`, `mm`, `io`, `both`, `null`, `empty`).
pub(super) fn body(shape: Shape, model: &str, case: &str) -> Vec<u8> {
    let hi = "Say hi.";
    let mut v = match shape {
        Shape::Chat => {
            json!({"model": model, "messages": [{"role": "user", "content": hi}], "max_tokens": 4})
        }
        Shape::ChatImage => {
            json!({"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What colour is this image?"},
            {"type": "image_url", "image_url": {"url": super::png::data_url()}}]}]})
        }
        Shape::Batch => json!({"model": model, "max_tokens": 4, "messages": [
            [{"role": "user", "content": hi}], [{"role": "user", "content": hi}]]}),
        Shape::Completion => json!({"model": model, "prompt": hi, "max_tokens": 4}),
        Shape::Responses => {
            json!({"model": model, "input": hi, "max_output_tokens": 4, "store": false})
        }
        Shape::Tokenize => json!({"model": model, "prompt": hi}),
        Shape::Input => json!({"model": model, "input": hi}),
        Shape::Score => json!({"model": model, "queries": hi, "documents": ["a", "b"]}),
        Shape::Rerank => json!({"model": model, "query": hi, "documents": ["a", "b"]}),
    };
    let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
    let (mm, io) = match case {
        "mm" => (Some(parse(MM)), None),
        "io" => (None, Some(parse(IO))),
        "both" => (Some(parse(MM)), Some(parse(IO))),
        "null" => (Some(Value::Null), Some(Value::Null)),
        "empty" => (Some(json!({})), Some(json!({}))),
        _ => (None, None),
    };
    if let Value::Object(m) = &mut v {
        if let Some(x) = mm {
            m.insert("mm_processor_kwargs".into(), x);
        }
        if let Some(x) = io {
            m.insert("media_io_kwargs".into(), x);
        }
    }
    v.to_string().into_bytes()
}
