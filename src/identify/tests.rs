use super::*;
use crate::config::Config;

// Clients are indexed in name order: batch = 0, vision = 1.
const BATCH: ClientId = ClientId::Named(0);
const VISION: ClientId = ClientId::Named(1);

const KEY: &str = "sk-vision-0123";

fn identifier(extra: &str) -> (Identifier, Config) {
    let text = format!(
        r#"
[upstream]
url = "http://127.0.0.1:8000"
[identity]
unknown = "{}"
api_key_header = "x-api-key"
client_header = "x-client-id"
trusted_networks = ["10.0.0.0/8", "127.0.0.1"]
[clients.vision]
key_sha256 = ["{}"]
[clients.batch]
header_ids = ["batch-a", "batch-b"]
"#,
        if extra == "reject" {
            "reject"
        } else {
            "anonymous"
        },
        hex::encode(digest(KEY)),
    );
    let mut c = Config::parse(&text).unwrap();
    // Certificate names need a [tls] listener to load; the identifier only reads them.
    for client in &mut c.clients {
        client.certificate_names = vec![format!("{}.svc.cluster.local", client.name)];
    }
    (Identifier::new(&c.identity, &c.clients), c)
}

fn conn(addr: &str, peer: Option<PeerCertificate>) -> ConnInfo {
    let local = "127.0.0.1:8080".parse().unwrap();
    ConnInfo::new(1, addr.parse().unwrap(), local, peer.map(Some))
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, v.parse().unwrap());
    }
    h
}

#[test]
fn bearer_and_key_header_identify_by_digest() {
    let (t, _) = identifier("");
    let c = conn("192.0.2.1:5000", None);
    for h in [
        headers(&[("authorization", "Bearer sk-vision-0123")]),
        headers(&[("authorization", "bearer  sk-vision-0123 ")]),
        headers(&[("x-api-key", KEY)]),
    ] {
        let id = t.identify(&h, &c).unwrap();
        assert_eq!((id.client, id.via), (VISION, Via::ApiKey));
    }
    // With the key header, `Authorization` is left to vLLM (its own `--api-key`).
    let h = headers(&[
        ("authorization", "Bearer vllms-own-key"),
        ("x-api-key", KEY),
    ]);
    let id = t.identify(&h, &c).unwrap();
    assert_eq!((id.client, id.via), (VISION, Via::ApiKey));
    let h = headers(&[
        ("authorization", &format!("Bearer {KEY}")),
        ("x-api-key", "nope"),
    ]);
    assert_eq!(t.identify(&h, &c).unwrap().client, ClientId::Anonymous);
    // The policy holds the digest only: the digest itself is not a key.
    let h = headers(&[(
        "authorization",
        &format!("Bearer {}", hex::encode(digest(KEY))),
    )]);
    assert_eq!(t.identify(&h, &c).unwrap().client, ClientId::Anonymous);
}

#[test]
fn a_blank_key_header_is_as_if_not_sent() {
    let (t, _) = identifier("reject");
    let c = conn("192.0.2.1:5000", None);
    for blank in ["", " ", "\t "] {
        let h = headers(&[
            ("x-api-key", blank),
            ("authorization", &format!("Bearer {KEY}")),
        ]);
        let id = t.identify(&h, &c).unwrap();
        assert_eq!((id.client, id.via), (VISION, Via::ApiKey), "{blank:?}");
        // Alone, it is no credential: the reason says so.
        let h = headers(&[("x-api-key", blank)]);
        match t.identify(&h, &c) {
            Err(GateError::Unauthorized { reason }) => {
                assert_eq!(reason, "no credentials were sent")
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn certificate_subject_or_san_maps_through_the_policy() {
    let (t, _) = identifier("");
    let by_san = PeerCertificate {
        subject_cn: Some("someone-else".into()),
        sans: vec!["vision.svc.cluster.local".into()],
    };
    let id = t
        .identify(&HeaderMap::new(), &conn("192.0.2.1:1", Some(by_san)))
        .unwrap();
    assert_eq!((id.client, id.via), (VISION, Via::Certificate));
    let by_cn = PeerCertificate {
        subject_cn: Some("vision.svc.cluster.local".into()),
        sans: vec![],
    };
    let id = t
        .identify(&HeaderMap::new(), &conn("192.0.2.1:1", Some(by_cn)))
        .unwrap();
    assert_eq!(id.via, Via::Certificate);
    let stranger = PeerCertificate {
        subject_cn: Some("stranger".into()),
        sans: vec![],
    };
    let id = t
        .identify(&HeaderMap::new(), &conn("192.0.2.1:1", Some(stranger)))
        .unwrap();
    assert_eq!(id.client, ClientId::Anonymous);
    // One client named twice is that client; names of two identify neither.
    let twice = PeerCertificate {
        subject_cn: Some("vision.svc.cluster.local".into()),
        sans: vec!["vision.svc.cluster.local".into()],
    };
    let id = t
        .identify(&HeaderMap::new(), &conn("192.0.2.1:1", Some(twice)))
        .unwrap();
    assert_eq!(id.client, VISION);
    let both = PeerCertificate {
        subject_cn: Some("vision.svc.cluster.local".into()),
        sans: vec!["batch.svc.cluster.local".into()],
    };
    let h = headers(&[("x-api-key", KEY)]);
    let id = t.identify(&h, &conn("192.0.2.1:1", Some(both.clone())));
    assert_eq!(id.unwrap().client, ClientId::Anonymous);
    let (strict, _) = identifier("reject");
    let refused = strict.identify(&HeaderMap::new(), &conn("192.0.2.1:1", Some(both)));
    assert!(refused.is_err());
}

#[test]
fn client_header_is_honoured_only_from_trusted_networks() {
    let (t, _) = identifier("");
    let h = headers(&[("x-client-id", "batch-b")]);
    let trusted = conn("10.1.2.3:1", None);
    let id = t.identify(&h, &trusted).unwrap();
    assert_eq!((id.client, id.via), (BATCH, Via::Header));
    assert!(!t.drop_spoofed_header(&mut h.clone(), &trusted));
    let id = t.identify(&h, &conn("[::ffff:127.0.0.1]:1", None)).unwrap();
    assert_eq!(id.client, BATCH);
    // From elsewhere: ignored by identification, and dropped (and reported) before it.
    let stranger = conn("192.0.2.9:1", None);
    let id = t.identify(&h, &stranger).unwrap();
    assert_eq!((id.client, id.via), (ClientId::Anonymous, Via::Anonymous));
    let mut dropped = h.clone();
    assert!(t.drop_spoofed_header(&mut dropped, &stranger));
    assert!(dropped.is_empty());
    assert!(!t.drop_spoofed_header(&mut HeaderMap::new(), &stranger));
}

#[test]
fn unknown_credentials_follow_the_policy() {
    let (t, _) = identifier("reject");
    let c = conn("192.0.2.1:1", None);
    for h in [
        HeaderMap::new(),
        headers(&[("authorization", "Bearer wrong")]),
        headers(&[("authorization", "Basic c2stdmlzaW9uLTAxMjM=")]),
    ] {
        let e = t.identify(&h, &c).unwrap_err();
        assert_eq!(e.status().as_u16(), 401);
    }
    let h = headers(&[("x-client-id", "nobody")]);
    assert!(t.identify(&h, &conn("10.0.0.1:1", None)).is_err());
}

#[test]
fn a_repeated_credential_header_identifies_nobody() {
    // An auth proxy that appends its verified value must not let the client's own win.
    let proxy = conn("10.0.0.1:1", None);
    let key = format!("Bearer {KEY}");
    for (unknown, expected) in [("reject", None), ("", Some(ClientId::Anonymous))] {
        let (t, _) = identifier(unknown);
        for h in [
            headers(&[("authorization", &key), ("authorization", "Bearer other")]),
            headers(&[("authorization", "Bearer other"), ("authorization", &key)]),
            headers(&[("x-api-key", KEY), ("x-api-key", "other")]),
            headers(&[("x-client-id", "batch-a"), ("x-client-id", "nobody")]),
            headers(&[("x-client-id", "batch-a"), ("x-client-id", "batch-a")]),
        ] {
            let got = t.identify(&h, &proxy).ok().map(|id| id.client);
            assert_eq!(got, expected, "{h:?}");
        }
        // Each alone identifies its client.
        let id = t.identify(&headers(&[("authorization", &key)]), &proxy);
        assert_eq!(id.unwrap().client, VISION);
        let id = t.identify(&headers(&[("x-client-id", "batch-a")]), &proxy);
        assert_eq!(id.unwrap().client, BATCH);
    }
}

/// Review B: an IPv4-mapped network in `trusted_networks` (as mmgate's own logs print a
/// dual-stack listener's IPv4 clients: `client_addr` "::ffff:10.1.2.3") is accepted by the
/// policy but never matches, since the source address is canonicalised to IPv4 first.
#[test]
fn an_ipv4_mapped_trusted_network_matches_its_ipv4_clients() {
    let text = r#"
[upstream]
url = "http://127.0.0.1:8000"
[identity]
client_header = "x-client-id"
trusted_networks = ["::ffff:10.0.0.0/104"]
[clients.batch]
header_ids = ["batch-a"]
"#;
    let c = Config::parse(text).unwrap();
    let t = Identifier::new(&c.identity, &c.clients);
    let h = headers(&[("x-client-id", "batch-a")]);
    let proxy = conn("[::ffff:10.1.2.3]:1", None);
    assert_eq!(proxy.remote_ip(), "::ffff:10.1.2.3");
    let id = t.identify(&h, &proxy).unwrap();
    assert_eq!((id.client, id.via), (ClientId::Named(0), Via::Header));
}
