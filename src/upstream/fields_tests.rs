use super::*;

/// `head` parsed as httparse parses an upstream's, and its fields kept.
fn kept(head: &[u8]) -> ResponseFields {
    let mut fields = [httparse::EMPTY_HEADER; 16];
    let mut parsed = httparse::Response::new(&mut fields);
    let parser = super::super::h1::parser();
    let httparse::Status::Complete(len) = parser.parse_response(&mut parsed, head).unwrap() else {
        panic!("a partial head");
    };
    Kept::of(&head[..len], parsed.headers).over(Bytes::copy_from_slice(&head[..len]), false)
}

/// What the lines are taken apart by relies on heads like these being refused.
#[test]
fn the_parser_refuses_spaced_names_folded_lines_and_bare_crs() {
    for head in [
        &b"HTTP/1.1 200 OK\r\nX-A : b\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: b\rc\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: b\r\n\tc\r\n\r\n",
    ] {
        let mut fields = [httparse::EMPTY_HEADER; 4];
        let mut parsed = httparse::Response::new(&mut fields);
        let parser = super::super::h1::parser();
        assert!(
            parser.parse_response(&mut parsed, head).is_err(),
            "{}",
            head.escape_ascii()
        );
    }
}

fn written(fields: &ResponseFields, own: &HeaderMap, with_length: bool) -> String {
    let bytes: Vec<u8> = fields.pieces(own, with_length).flatten().copied().collect();
    String::from_utf8(bytes).unwrap()
}

const VLLM: &[u8] =
    b"HTTP/1.1 200 OK\r\ndate: Fri, 04 Dec 2026 21:13:11 GMT\r\nserver: uvicorn\r\n\
content-length: 239\r\ncontent-type: application/json\r\n\r\n{\"id\"";

#[test]
fn fields_are_passed_on_as_they_came_in_as_few_pieces_as_their_order_allows() {
    let f = kept(VLLM);
    assert!(f.has_date() && f.has_length());
    let none = HeaderMap::new();
    assert_eq!(
        f.pieces(&none, false).collect::<Vec<_>>(),
        [
            &b"date: Fri, 04 Dec 2026 21:13:11 GMT\r\nserver: uvicorn\r\n"[..],
            b"content-type: application/json\r\n"
        ]
    );
    assert_eq!(
        written(&f, &none, true),
        "date: Fri, 04 Dec 2026 21:13:11 GMT\r\nserver: uvicorn\r\ncontent-length: 239\r\n\
         content-type: application/json\r\n"
    );
    let bare = kept(b"HTTP/1.1 204 No Content\r\nX-A:  b c \r\n\r\n");
    assert!(!bare.has_date() && !bare.has_length());
    assert_eq!(written(&bare, &none, true), "X-A:  b c \r\n");
}

#[test]
fn hop_by_hop_fields_and_those_connection_names_are_left_out() {
    let f = kept(
        b"HTTP/1.1 200 OK\r\nConnection: X-Gone, close\r\nx-kept: 1\r\nKeep-Alive: timeout=5\r\n\
          x-gone: 2\r\nTransfer-Encoding: chunked\r\nX-Kept: 3\r\nUpgrade: h2c\r\nTE: x\r\n\
          Trailer: y\r\nProxy-Authenticate: z\r\nProxy-Connection: w\r\n\r\n",
    );
    let none = HeaderMap::new();
    assert_eq!(written(&f, &none, true), "x-kept: 1\r\nX-Kept: 3\r\n");
    let mut map = HeaderMap::new();
    f.into_map(&mut map);
    assert_eq!(map.len(), 2);
    assert_eq!(map.get_all("x-kept").iter().collect::<Vec<_>>(), ["1", "3"]);
}

#[test]
fn lines_ending_in_a_bare_lf_are_written_with_crlf() {
    // httparse takes a bare LF as a line's end; the client is sent CRLF.
    let f = kept(
        b"HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 2\r\nconnection: x-b\r\nx-b: 0\r\n\
          x-c:\t2 \nx-d: 3\n\nhi",
    );
    let none = HeaderMap::new();
    assert_eq!(
        written(&f, &none, true),
        "x-a: 1\r\ncontent-length: 2\r\nx-c: 2\r\nx-d: 3\r\n"
    );
    assert_eq!(written(&f, &none, false), "x-a: 1\r\nx-c: 2\r\nx-d: 3\r\n");
    assert!(f.has_length());
}

#[test]
fn the_gateways_own_fields_replace_the_upstreams_of_the_same_names() {
    let f = kept(
        b"HTTP/1.1 200 OK\r\nX-Mmgate-Stripped: forged\r\nx-a: 1\r\nx-mmgate-stripped: again\r\n\
          content-type: text/plain\r\n\r\n",
    );
    let mut own = HeaderMap::new();
    own.insert(
        "x-mmgate-stripped",
        HeaderValue::from_static("media_io_kwargs"),
    );
    assert_eq!(
        written(&f, &own, false),
        "x-a: 1\r\ncontent-type: text/plain\r\n"
    );
    f.into_map(&mut own);
    assert_eq!(own.len(), 3);
    assert_eq!(own["x-mmgate-stripped"], "media_io_kwargs");
    assert_eq!(own["x-a"], "1");
    assert_eq!(own["content-type"], "text/plain");
}

#[test]
fn the_map_holds_what_parsing_the_fields_one_by_one_gives() {
    let f = kept(VLLM);
    let mut map = HeaderMap::new();
    f.into_map(&mut map);
    let mut expected = HeaderMap::new();
    for (name, value) in [
        ("date", "Fri, 04 Dec 2026 21:13:11 GMT"),
        ("server", "uvicorn"),
        ("content-length", "239"),
        ("content-type", "application/json"),
    ] {
        expected.append(name, HeaderValue::from_static(value));
    }
    assert_eq!(map, expected);
}

/// The module's claim: a field httparse takes, `http` takes too (so `into_map` loses none).
#[test]
fn what_httparse_takes_in_names_and_values_http_takes_too() {
    // A name or value with byte `b` in it: what httparse reads of it, and whether `http`
    // takes that; and whether `http` takes the whole.
    let check = |head: Vec<u8>, whole: &[u8], name: bool| {
        let mut fields = [httparse::EMPTY_HEADER; 4];
        let mut parsed = httparse::Response::new(&mut fields);
        let read = parsed.parse(&head).ok().map(|_| {
            let f = &parsed.headers[0];
            let got: &[u8] = if name { f.name.as_bytes() } else { f.value };
            let taken = match name {
                true => HeaderName::from_bytes(got).is_ok(),
                false => HeaderValue::from_bytes(got).is_ok(),
            };
            (got.to_vec(), taken)
        });
        let http = match name {
            true => HeaderName::from_bytes(whole).is_ok(),
            false => HeaderValue::from_bytes(whole).is_ok(),
        };
        (read, http)
    };
    for b in 0..=255u8 {
        let name = vec![b'x', b, b'y'];
        let mut name_head = b"HTTP/1.1 200 OK\r\n".to_vec();
        name_head.extend(&name);
        name_head.extend(b": v\r\n\r\n");
        // 64 bytes, so that httparse's vectored path looks at the byte too.
        let value: Vec<u8> = std::iter::repeat_n(b'v', 40)
            .chain([b])
            .chain(std::iter::repeat_n(b'w', 23))
            .collect();
        let mut value_head = b"HTTP/1.1 200 OK\r\nx: ".to_vec();
        value_head.extend(&value);
        value_head.extend(b"\r\n\r\n");
        for (head, whole, is_name) in [(name_head, name, true), (value_head, value, false)] {
            let (read, http) = check(head, &whole, is_name);
            if let Some((_, taken)) = &read {
                assert!(taken, "byte {b:#x}, name {is_name}");
            }
            if http {
                assert_eq!(read.unwrap().0, whole, "byte {b:#x}, name {is_name}");
            }
        }
    }
}
