//! Percent-encoding of URL parts, as Go's `net/url` does it (the Go server builds the same URLs).

/// Percent-encodes a query-string value the way Go's `url.QueryEscape` does: unreserved
/// characters (`A-Z a-z 0-9 - _ . ~`) stay, a space becomes `+`, every other byte `%XX`.
pub fn query_escape(v: &str) -> String {
    percent_encode(v, "+")
}

/// Percent-encodes `v` as one URL path segment: unreserved characters (`A-Z a-z 0-9 - _ . ~`)
/// stay, every other byte (`/` and space included) becomes `%XX`.
pub fn path_escape(v: &str) -> String {
    percent_encode(v, "%20")
}

fn percent_encode(v: &str, space: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for &b in v.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push_str(space),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_escape_matches_go() {
        assert_eq!(query_escape("payments--checkout--checkout-api"), "payments--checkout--checkout-api");
        assert_eq!(query_escape("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn path_escape_keeps_one_segment() {
        assert_eq!(path_escape("c0ffee00-0000-4000-8000-000000000201"), "c0ffee00-0000-4000-8000-000000000201");
        assert_eq!(path_escape("../../admin?x=1 #"), "..%2F..%2Fadmin%3Fx%3D1%20%23");
    }
}
