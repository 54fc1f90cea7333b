//! Inspection throughput on chat bodies with a base64 image, next to a memchr pass and a
//! memcpy over the same bytes (the baselines the targets are stated against).

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mmgate::inspect::{inspect, Field, RENDER_MAX_DEPTH};

/// A chat body of about `size` bytes: one image content part, kwargs first or last.
fn chat_body(size: usize, kwargs_first: bool) -> Vec<u8> {
    let kwargs = r#""mm_processor_kwargs":{"max_pixels":1003520}"#;
    let image: String = (0..size.saturating_sub(300))
        .map(|i| {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[i * 7 % 64] as char
        })
        .collect();
    let messages = format!(
        r#""messages":[{{"role":"user","content":[{{"type":"text","text":"What is in this image?"}},{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{image}"}}}}]}}]"#
    );
    let body = if kwargs_first {
        format!(r#"{{"model":"tiny",{kwargs},{messages},"max_tokens":16}}"#)
    } else {
        format!(r#"{{"model":"tiny",{messages},"max_tokens":16,{kwargs}}}"#)
    };
    body.into_bytes()
}

fn sizes() -> [(usize, &'static str); 4] {
    [
        (1 << 10, "1KB"),
        (100 << 10, "100KB"),
        (2 << 20, "2MB"),
        (16 << 20, "16MB"),
    ]
}

fn bench_inspect(c: &mut Criterion) {
    let mut g = c.benchmark_group("inspect");
    for (size, name) in sizes() {
        for first in [true, false] {
            let body = chat_body(size, first);
            g.throughput(Throughput::Bytes(body.len() as u64));
            let label = format!(
                "{name}/{}",
                if first { "fields_first" } else { "fields_last" }
            );
            g.bench_with_input(BenchmarkId::new("mmgate", &label), &body, |b, body| {
                b.iter(|| {
                    let f = inspect(body, RENDER_MAX_DEPTH).unwrap();
                    assert!(f.field(Field::MmProcessorKwargs).truthy());
                })
            });
        }
        let body = chat_body(size, true);
        g.bench_with_input(BenchmarkId::new("memchr", name), &body, |b, body| {
            b.iter(|| assert!(memchr::memchr(0, body).is_none()))
        });
    }
    g.finish();
}

fn bench_strip(c: &mut Criterion) {
    let mut g = c.benchmark_group("strip");
    let body = Bytes::from(chat_body(16 << 20, false));
    let findings = inspect(&body, RENDER_MAX_DEPTH).unwrap();
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("mmgate/16MB", |b| {
        b.iter(|| std::hint::black_box(mmgate::rewrite::strip(&body, &findings, &Field::ALL)).len())
    });
    g.bench_function("memcpy/16MB", |b| {
        b.iter(|| std::hint::black_box(std::hint::black_box(&body[..]).to_vec()).len())
    });
    g.finish();
}

mod harness {
    #![allow(missing_docs)]
    use super::*;
    criterion_group!(benches, bench_inspect, bench_strip);
}
criterion_main!(harness::benches);
