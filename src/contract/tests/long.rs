//! Long values and huge numbers, as the real server answered them: strings and numbers past
//! the inline length are read whole, and an integer too large for a float is no float.

use super::*;

/// `route`'s verdict on a body of `base` and `member` (with truthy kwargs).
fn judged(route: RouteKind, base: &str, member: &str) -> Verdict {
    with_kwargs(route, base, member, &UpstreamFacts::default())
}

fn refused(v: &Verdict) -> bool {
    matches!(v, Verdict::Invalid(_))
}

/// 2^1024 − 2^970: the least integer whose `float()` overflows.
const OVERFLOWS: &str = "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792";

/// One less: the greatest that still makes a float.
const FITS: &str = "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791";

#[test]
fn an_integer_too_large_for_a_float_is_refused_by_float_fields() {
    let chat = |member: &str| judged(RouteKind::Chat, r#""messages":[]"#, member);
    for field in ["temperature", "top_p", "presence_penalty", "length_penalty"] {
        let too_large = chat(&format!(r#""{field}":{OVERFLOWS}"#));
        assert!(refused(&too_large), "{field}: {too_large:?}");
        let negative = chat(&format!(r#""{field}":-{OVERFLOWS}"#));
        assert!(refused(&negative), "{field} negative: {negative:?}");
    }
    // One less is a float; written with a fraction or exponent it is a float already (inf).
    for taken in [
        format!(r#""temperature":{FITS}"#),
        format!(r#""temperature":{OVERFLOWS}.0"#),
        format!(r#""temperature":{OVERFLOWS}e0"#),
    ] {
        assert_eq!(
            chat(&taken),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{taken}"
        );
    }
    // An int field takes it (seed is bounded, `n` is not read here).
    let logit_bias = |value: &str| {
        let member = format!(r#""logit_bias":{{"1":{value}}}"#);
        judged(RouteKind::Completions, r#""prompt":"hi""#, &member)
    };
    assert!(refused(&logit_bias(OVERFLOWS)));
    assert_eq!(logit_bias(FITS), Verdict::Reject(Field::MmProcessorKwargs));
    let responses = judged(
        RouteKind::Responses,
        r#""input":"hi""#,
        &format!(r#""top_p":{OVERFLOWS}"#),
    );
    assert!(refused(&responses));
}

#[test]
fn strings_past_the_inline_length_are_read_whole() {
    let chat = |member: &str| judged(RouteKind::Chat, r#""messages":[]"#, member);
    // A Literal: 22 letters are kept inline, 23 were not before.
    for n in [22, 23, 80, 500] {
        let effort = chat(&format!(r#""reasoning_effort":"{}""#, "a".repeat(n)));
        assert!(refused(&effort), "{n}: {effort:?}");
    }
    let escaped_word = chat(r#""reasoning_effort":"\u006c\u006f\u0077""#);
    assert_eq!(escaped_word, Verdict::Reject(Field::MmProcessorKwargs));
    // Bounded ints, as numbers or numeric strings, of any length.
    for member in [
        r#""stream_interval":0.00000000000000000000000"#,
        r#""seed":"11111111111111111111111""#,
        r#""seed":"  111111111111111111111111111111111111111111111111111111111111111111111111  ""#,
        r#""stream_interval":"００００００００００００００００１""#,
    ] {
        let got = chat(member);
        assert!(refused(&got), "{member}: {got:?}");
    }
    for member in [
        r#""stream_interval":1.00000000000000000000000"#,
        r#""seed":"00000000000000000000000000000000000000000000000000000000000000000000000007""#,
    ] {
        assert_eq!(
            chat(member),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{member}"
        );
    }
    let penalty = judged(
        RouteKind::Responses,
        r#""input":"hi""#,
        r#""presence_penalty":3.00000000000000000000000"#,
    );
    assert!(refused(&penalty));
    // A lone surrogate after a long run (`string_unicode`); a pair is text.
    let completions = |member: &str| judged(RouteKind::Completions, r#""prompt":"hi""#, member);
    let salt = completions(&format!(r#""cache_salt":"{}\ud800""#, "a".repeat(100)));
    assert!(refused(&salt), "{salt:?}");
    let pair = completions(&format!(
        r#""cache_salt":"{}\ud83d\ude00""#,
        "a".repeat(100)
    ));
    assert_eq!(pair, Verdict::Reject(Field::MmProcessorKwargs));
}

/// An encoded lone surrogate (`ED A0 80`, which `surrogatepass` decodes) in a long string
/// that a letter shows to be no number is found as an escaped one is (`string_unicode`).
#[test]
fn an_encoded_surrogate_in_a_long_string_is_found() {
    let salt = |tail: &[u8]| {
        let mut body =
            br#"{"model":"m","prompt":"hi","mm_processor_kwargs":{"a":1},"cache_salt":"b"#.to_vec();
        body.extend("\u{1f600}".repeat(100).as_bytes());
        body.extend_from_slice(tail);
        body.extend_from_slice(br#""}"#);
        let f = inspect(&body, RENDER_MAX_DEPTH).unwrap();
        verdict(RouteKind::Completions, &f, &UpstreamFacts::default())
    };
    assert!(refused(&salt(b"\xed\xa0\x80")));
    assert_eq!(salt(b"c"), Verdict::Reject(Field::MmProcessorKwargs));
}
