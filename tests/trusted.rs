//! Trusted clients: identity, per-client policy and the trusted pool's value limits, against
//! two in-process fake upstreams (`default` and `trusted`) that record what reaches them.

mod support;

use mmgate::config::digest;
use support::trusted::*;
use support::*;

#[tokio::test]
async fn each_identity_kind_selects_its_clients_policy() {
    let s = setup(&policy("anonymous", "\"127.0.0.0/8\"", "", "")).await;
    let c = client();
    // API key (bearer, then the extra key header): the trusted client is routed as sent.
    let auth = bearer(VISION_KEY);
    for h in [("authorization", auth.as_str()), ("x-api-key", VISION_KEY)] {
        let r = chat(&c, &s, &[h], KWARGS).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let sent = s.trusted.received();
    assert_eq!(sent.len(), 2);
    // Authorization goes on (vLLM's own `--api-key` reads it); the key header is mmgate's.
    assert_eq!(sent[0].headers["authorization"], auth);
    assert!(!sent[1].headers.contains_key("x-api-key"));
    // The trusted header from a trusted network (loopback here) identifies the group.
    let r = chat(&c, &s, &[("x-client-id", "partner-b")], KWARGS).await;
    assert_eq!(r.status, 200);
    assert_eq!(s.trusted.received().len(), 3);
    // Stripped and rejected clients, and anonymous (the [gate] mode: strip).
    let auth = bearer(STRIP_KEY);
    let r = chat(&c, &s, &[("authorization", &auth)], KWARGS).await;
    assert_eq!(r.headers["x-mmgate-stripped"], "mm_processor_kwargs");
    let auth = bearer(REJECT_KEY);
    let r = chat(&c, &s, &[("authorization", &auth)], KWARGS).await;
    assert_eq!(r.text(), mmgate::error::GATE_BODY_MM_PROCESSOR_KWARGS);
    let r = chat(&c, &s, &[], KWARGS).await;
    assert_eq!(r.headers["x-mmgate-stripped"], "mm_processor_kwargs");
    assert_eq!(s.trusted.received().len(), 3);
    assert_eq!(s.default.received().len(), 2);
    // A trusted client's request without kwargs goes to the default pool.
    let auth = bearer(VISION_KEY);
    assert_eq!(
        chat(&c, &s, &[("authorization", &auth)], "").await.status,
        200
    );
    assert_eq!(s.default.received().len(), 3);
    let m = |l: &str| format!("mmgate_identified_requests_total{{via=\"{l}\"}}");
    assert_eq!(metric(&c, s.gw.admin, &m("api_key")).await, Some(5.0));
    assert_eq!(metric(&c, s.gw.admin, &m("header")).await, Some(1.0));
    assert_eq!(metric(&c, s.gw.admin, &m("anonymous")).await, Some(1.0));
    let routed = "mmgate_client_requests_total{client=\"vision\",outcome=\"routed\"}";
    assert_eq!(metric(&c, s.gw.admin, routed).await, Some(2.0));
}

#[tokio::test]
async fn unknown_credentials_get_401_on_every_route() {
    let s = setup(&policy("reject", "\"127.0.0.0/8\"", "", "")).await;
    let c = client();
    // The digest itself is not a key: the policy holds no plaintext.
    let digest_as_key = bearer(&hex::encode(digest(VISION_KEY)));
    for (method, path, h) in [
        ("POST", CHAT, None),
        ("POST", "/tokenize", Some(("authorization", "Bearer nope"))),
        (
            "POST",
            "/pooling",
            Some(("authorization", digest_as_key.as_str())),
        ),
        ("GET", "/v1/models", None),
        ("GET", "/health", Some(("x-client-id", "stranger"))),
    ] {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend(h);
        let r = send(&c, s.gw.addr, method, path, &headers, body("")).await;
        assert_eq!(r.status, 401, "{method} {path}");
        assert_eq!(r.headers["www-authenticate"], "Bearer");
        assert!(
            message(&r).contains("Authorization: Bearer"),
            "{}",
            r.text()
        );
    }
    assert!(s.default.received().is_empty() && s.trusted.received().is_empty());
    let auth = "mmgate_refusals_total{pool=\"none\",reason=\"auth\"}";
    assert_eq!(metric(&c, s.gw.admin, auth).await, Some(5.0));
    // Each counted on the route it was sent to.
    let on = |r: &str| {
        format!("mmgate_requests_total{{mode=\"none\",outcome=\"refused\",route=\"{r}\"}}")
    };
    assert_eq!(metric(&c, s.gw.admin, &on("chat")).await, Some(1.0));
    assert_eq!(metric(&c, s.gw.admin, &on("ungated")).await, Some(2.0));
    let ok = send(
        &c,
        s.gw.addr,
        "GET",
        "/v1/models",
        &[("x-api-key", STRIP_KEY)],
        "",
    )
    .await;
    assert_eq!(ok.status, 200);
}

#[tokio::test]
async fn untrusted_clients_never_reach_the_trusted_pool() {
    // Loopback is not a trusted network here: the header is a spoof.
    let s = setup(&policy("anonymous", "\"10.0.0.0/8\"", "", "")).await;
    let c = client();
    let spoof = ("x-client-id", "partner-a");
    let legacy = bearer(STRIP_KEY);
    let batch = bearer(REJECT_KEY);
    let io = r#""media_io_kwargs":{"video":{"num_frames":8}}"#;
    for headers in [
        vec![spoof],
        vec![spoof, ("authorization", &legacy)],
        vec![spoof, ("authorization", &batch)],
        vec![("authorization", "Bearer wrong")],
    ] {
        for kwargs in [KWARGS, io] {
            let r = chat(&c, &s, &headers, kwargs).await;
            assert!(r.status == 200 || r.status == 400, "{}", r.text());
        }
    }
    assert!(
        s.trusted.received().is_empty(),
        "an untrusted request reached the trusted pool"
    );
    for got in s.default.received() {
        assert!(!String::from_utf8_lossy(&got.body).contains("kwargs"));
        assert!(
            !got.headers.contains_key("x-client-id"),
            "spoofed header forwarded"
        );
    }
    let ignored = "mmgate_ignored_client_headers_total";
    assert_eq!(metric(&c, s.gw.admin, ignored).await, Some(6.0));
}

#[tokio::test]
async fn a_spoofed_header_refused_for_want_of_credentials_is_still_counted() {
    // Loopback is not a trusted network, and unknown clients are refused: the spoof alone
    // identifies nobody, gets the 401, and is what the spoof alert counts.
    let s = setup(&policy("reject", "\"10.0.0.0/8\"", "", "")).await;
    let c = client();
    let r = chat(&c, &s, &[("x-client-id", "partner-a")], KWARGS).await;
    assert_eq!(r.status, 401, "{}", r.text());
    let auth = bearer(STRIP_KEY);
    let r = chat(
        &c,
        &s,
        &[("x-client-id", "partner-a"), ("authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(s.trusted.received().is_empty());
    assert!(!s.default.received()[0].headers.contains_key("x-client-id"));
    let ignored = "mmgate_ignored_client_headers_total";
    assert_eq!(metric(&c, s.gw.admin, ignored).await, Some(2.0));
}

#[tokio::test]
async fn value_bounds_and_allowlists_guard_the_trusted_pool() {
    let s = setup(&policy(
        "anonymous",
        "\"127.0.0.0/8\"",
        "max_body_bytes = 400",
        "",
    ))
    .await;
    let c = client();
    let auth = bearer(VISION_KEY);
    let h = [("authorization", auth.as_str())];
    let ok = r#""mm_processor_kwargs":{"max_pixels":1003520,"do_resize":true},"media_io_kwargs":{"video":{"fps":2,"num_frames":32}}"#;
    assert_eq!(chat(&c, &s, &h, ok).await.status, 200);
    for (kwargs, names) in [
        (
            r#""mm_processor_kwargs":{"max_pixels":1003521}"#,
            ["mm_processor_kwargs.max_pixels", "max_pixels <= 1003520"],
        ),
        (
            r#""media_io_kwargs":{"video":{"num_frames":64}}"#,
            ["media_io_kwargs.video.num_frames", "num_frames <= 32"],
        ),
        (
            r#""media_io_kwargs":{"video":{"fps":30}}"#,
            ["media_io_kwargs.video.fps", "fps <= 2"],
        ),
        (
            r#""mm_processor_kwargs":{"do_resize":false}"#,
            [
                "mm_processor_kwargs.do_resize",
                "do_resize one of true (got false)",
            ],
        ),
        (
            r#""mm_processor_kwargs":{"min_pixels":1}"#,
            [
                "mm_processor_kwargs.min_pixels",
                "allowed key (do_resize, max_pixels)",
            ],
        ),
        (
            r#""media_io_kwargs":{"image":{"x":1}}"#,
            ["media_io_kwargs.image", "allowed modality (video)"],
        ),
    ] {
        let r = chat(&c, &s, &h, kwargs).await;
        assert_eq!(r.status, 400, "{kwargs}");
        let m = message(&r);
        assert!(
            names.iter().all(|n| m.contains(n)) && m.contains("resend"),
            "{m}"
        );
    }
    let big = format!(
        r#""mm_processor_kwargs":{{"max_pixels":1}},"pad":"{}""#,
        "x".repeat(400)
    );
    assert_eq!(chat(&c, &s, &h, &big).await.status, 413);
    assert_eq!(s.trusted.received().len(), 1);
    let refused = "mmgate_refusals_total{pool=\"trusted\",reason=\"value_bound\"}";
    assert_eq!(metric(&c, s.gw.admin, refused).await, Some(6.0));
}

#[tokio::test]
async fn a_body_mmgate_cannot_read_never_reaches_a_pool_with_value_limits() {
    // Clients whose own pool is the trusted one, in each forwarding mode: a body mmgate does
    // not read carries kwargs nobody checked, so it is refused as `reject` refuses it.
    const PASS_KEY: &str = "sk-vision-pass";
    const SHADOW_KEY: &str = "sk-vision-shadow";
    let hash = |k: &str| hex::encode(digest(k));
    let own = |name: &str, key: &str, mode: &str| {
        format!(
            "[clients.{name}]\nkey_sha256 = [\"{}\"]\ntrusted = true\nmode = \"{mode}\"\npool = \"trusted\"\n",
            hash(key)
        )
    };
    let extra = format!(
        "pool = \"trusted\"\n{}{}",
        own("vpass", PASS_KEY, "pass"),
        own("vshadow", SHADOW_KEY, "shadow")
    );
    let s = setup(&policy("anonymous", "\"127.0.0.0/8\"", "", &extra)).await;
    let c = client();
    // Past mmgate's bound on top-level members (empty keys, which vLLM's parser folds into
    // one), with a value over the pool's bound; and a body that is no JSON at all.
    let filler = vec![r#""":0"#; mmgate::inspect::MAX_MEMBERS].join(",");
    let too_many = body(&format!(
        r#""mm_processor_kwargs":{{"max_pixels":99999999}},{filler}"#
    ));
    let not_json = r#"{"model":"tiny","mm_processor_kwargs":{"max_pixels":99999999},"#;
    for key in [VISION_KEY, PASS_KEY, SHADOW_KEY] {
        let auth = bearer(key);
        let h = [
            ("content-type", "application/json"),
            ("authorization", auth.as_str()),
        ];
        let r = send(&c, s.gw.addr, "POST", CHAT, &h, too_many.clone()).await;
        assert_eq!(r.status, 400, "{key}: {}", r.text());
        assert!(r.text().contains("more than 10000 members"), "{}", r.text());
        let r = send(&c, s.gw.addr, "POST", CHAT, &h, not_json.to_string()).await;
        assert_eq!(r.status, 400, "{key}: {}", r.text());
        assert!(
            r.text().contains("json_invalid"),
            "vLLM's answer: {}",
            r.text()
        );
        // Read, within the bounds: it reaches the pool.
        assert_eq!(
            chat(&c, &s, &[("authorization", &auth)], KWARGS)
                .await
                .status,
            200
        );
    }
    assert_eq!(s.trusted.received().len(), 3);
    assert!(s.default.received().is_empty());
}

#[tokio::test]
async fn a_header_identified_client_keeps_its_identity_when_it_sends_vllms_api_key() {
    const VLLM_KEY: &str = "sk-vllm-own-key";
    let extra = format!(
        "[vllm]\napi_key_sha256 = [\"{}\"]\n",
        hex::encode(digest(VLLM_KEY))
    );
    let s = setup(&format!(
        "{}{extra}",
        policy("anonymous", "\"127.0.0.0/8\"", "", "")
    ))
    .await;
    let c = client();
    // Without Authorization the auth proxy's header identifies `partners`: routed as sent.
    let r = chat(&c, &s, &[("x-client-id", "partner-b")], KWARGS).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(s.trusted.received().len(), 1);
    // The same client with the vLLM key vLLM's own --api-key needs (the policy names it):
    let auth = bearer(VLLM_KEY);
    let r = chat(
        &c,
        &s,
        &[("x-client-id", "partner-b"), ("authorization", &auth)],
        KWARGS,
    )
    .await;
    let stripped = r.headers.get("x-mmgate-stripped").cloned();
    assert_eq!(
        (s.trusted.received().len(), stripped),
        (2, None),
        "the trusted client became anonymous (kwargs stripped, default pool)"
    );
    s.gw.stop().await;
}
