//! Automatic persisted queries (Apollo's APQ protocol, as the reference serves it): a client
//! sends `extensions.persistedQuery = {version: 1, sha256Hash}` with or without the query text.
//!
//! - hash only, known → the stored text is executed as if sent;
//! - hash only, unknown → one error `PersistedQueryNotFound` with code
//!   `PERSISTED_QUERY_NOT_FOUND` (the client then sends hash and text);
//! - hash and text → the text's SHA-256 must be the hash (else `BAD_USER_INPUT` "provided sha
//!   does not match query"), the text is stored, and executed.
//!
//! The store holds query texts only (no data, nothing per viewer), at most
//! [`PersistedQueries::capacity`] of them, least recently used first out; a text longer than
//! [`MAX_TEXT`] is executed but not stored. Everything after — text limits, parsing and its
//! cache, validation, the cost analysis, isolation — is what any request gets.

use async_graphql::{ServerError, Value};
use sha2::{Digest, Sha256};
use std::num::NonZeroUsize;
use std::sync::Mutex;

/// The longest query text stored, in bytes.
pub const MAX_TEXT: usize = 16 * 1024;

/// Query texts kept by default (`graphql.persistedQueries`).
pub const DEFAULT_CAPACITY: usize = 1000;

/// The `extensions.code` of an unknown hash.
pub const NOT_FOUND: &str = "PERSISTED_QUERY_NOT_FOUND";

/// Stored query texts by SHA-256 (lowercase hex).
pub struct PersistedQueries(Mutex<lru::LruCache<[u8; 32], String>>);

impl PersistedQueries {
    /// A store of at most `capacity` texts (at least 1).
    pub fn new(capacity: usize) -> PersistedQueries {
        PersistedQueries(Mutex::new(lru::LruCache::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN))))
    }

    /// How many texts it holds at most.
    pub fn capacity(&self) -> usize {
        self.lock().cap().get()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, lru::LruCache<[u8; 32], String>> {
        // A cache: a panic while holding the lock cannot leave it inconsistent for its readers.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies the protocol to `request`: leaves a request without `extensions.persistedQuery`
    /// as it is, fills in the stored text of a known hash, stores the text of a hash sent with
    /// it.
    ///
    /// # Errors
    /// The one error to answer with: `PERSISTED_QUERY_NOT_FOUND` for an unknown hash,
    /// `BAD_USER_INPUT` for another version than 1, a hash that is not 64 hex digits, or a text
    /// whose SHA-256 is another.
    pub fn resolve(&self, request: &mut async_graphql::Request) -> Result<(), ServerError> {
        let Some(persisted) = request.extensions.get("persistedQuery") else { return Ok(()) };
        let Value::Object(fields) = persisted else { return Err(bad_input("extensions.persistedQuery must be an object")) };
        match fields.get("version") {
            Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
            _ => return Err(bad_input("unsupported persisted query version (supported: 1)")),
        }
        let hash = match fields.get("sha256Hash") {
            Some(Value::String(h)) => parse_hash(h).ok_or_else(|| bad_input("persistedQuery.sha256Hash must be 64 hex digits"))?,
            _ => return Err(bad_input("persistedQuery.sha256Hash must be 64 hex digits")),
        };
        if request.query.is_empty() {
            return match self.lock().get(&hash) {
                Some(text) => {
                    request.query = text.clone();
                    Ok(())
                }
                None => Err(ServerError::new("PersistedQueryNotFound", None).with_code(NOT_FOUND)),
            };
        }
        if <[u8; 32]>::from(Sha256::digest(request.query.as_bytes())) != hash {
            return Err(bad_input("provided sha does not match query"));
        }
        if request.query.len() <= MAX_TEXT {
            self.lock().put(hash, request.query.clone());
        }
        Ok(())
    }
}

/// 64 hex digits (either case) as 32 bytes.
fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

fn bad_input(message: &str) -> ServerError {
    ServerError::new(message, None).with_code("BAD_USER_INPUT")
}

/// Sets `extensions.code` of a server error.
trait WithCode {
    fn with_code(self, code: &str) -> ServerError;
}

impl WithCode for ServerError {
    fn with_code(mut self, code: &str) -> ServerError {
        let mut extensions = async_graphql::ErrorExtensionValues::default();
        extensions.set("code", code);
        self.extensions = Some(extensions);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(query: &str, extensions: serde_json::Value) -> async_graphql::Request {
        let mut r = async_graphql::Request::new(query);
        for (k, v) in extensions.as_object().unwrap() {
            r.extensions.insert(k.clone(), Value::from_json(v.clone()).unwrap());
        }
        r
    }

    fn code(e: &ServerError) -> String {
        e.extensions.as_ref().and_then(|x| x.get("code")).map(|v| v.to_string()).unwrap_or_default()
    }

    const QUERY: &str = "{ teams { totalCount } }";

    fn hash_of(text: &str) -> String {
        Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn a_hash_is_unknown_until_sent_with_its_text_then_stands_for_it() {
        let store = PersistedQueries::new(100);
        let pq = serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": hash_of(QUERY)}});
        let e = store.resolve(&mut request("", pq.clone())).unwrap_err();
        assert_eq!((e.message.as_str(), code(&e).as_str()), ("PersistedQueryNotFound", "\"PERSISTED_QUERY_NOT_FOUND\""));
        let mut with_text = request(QUERY, pq.clone());
        store.resolve(&mut with_text).unwrap();
        assert_eq!(with_text.query, QUERY);
        let mut hash_only = request("", pq);
        store.resolve(&mut hash_only).unwrap();
        assert_eq!(hash_only.query, QUERY, "the stored text");
        let upper = serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": hash_of(QUERY).to_uppercase()}});
        let mut upper_case = request("", upper);
        store.resolve(&mut upper_case).unwrap();
        assert_eq!(upper_case.query, QUERY, "hex digits in either case");
        let mut plain = request(QUERY, serde_json::json!({}));
        store.resolve(&mut plain).unwrap();
        assert_eq!(plain.query, QUERY, "no persistedQuery: unchanged");
    }

    #[test]
    fn hostile_persisted_queries_are_refused_with_bad_user_input() {
        let store = PersistedQueries::new(100);
        let other = hash_of("{ zones { name } }");
        for (query, ext) in [
            (QUERY, serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": other}})),
            ("", serde_json::json!({"persistedQuery": {"version": 2, "sha256Hash": hash_of(QUERY)}})),
            ("", serde_json::json!({"persistedQuery": {"sha256Hash": hash_of(QUERY)}})),
            ("", serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": "ab".repeat(5000)}})),
            ("", serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": "zz".repeat(32)}})),
            ("", serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": "é".repeat(32)}})),
            ("", serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": 7}})),
            ("", serde_json::json!({"persistedQuery": "yes"})),
        ] {
            let e = store.resolve(&mut request(query, ext.clone())).unwrap_err();
            assert_eq!(code(&e), "\"BAD_USER_INPUT\"", "{ext}: {}", e.message);
        }
        assert_eq!(store.lock().len(), 0, "nothing stored");
    }

    #[test]
    fn the_store_is_bounded_and_forgets_the_least_recently_used() {
        let store = PersistedQueries::new(3);
        let texts: Vec<String> = (0..5).map(|i| format!("{{ teams(first: {i}) {{ totalCount }} }}")).collect();
        for t in &texts {
            store.resolve(&mut request(t, serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": hash_of(t)}}))).unwrap();
        }
        assert_eq!(store.lock().len(), 3);
        let known = |t: &str| {
            store.resolve(&mut request("", serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": hash_of(t)}}))).is_ok()
        };
        assert!(!known(&texts[0]) && !known(&texts[1]) && known(&texts[4]));
        let long = format!("{{ teams {{ totalCount }} }} #{}", "x".repeat(MAX_TEXT));
        store.resolve(&mut request(&long, serde_json::json!({"persistedQuery": {"version": 1, "sha256Hash": hash_of(&long)}}))).unwrap();
        assert!(!known(&long), "a text over MAX_TEXT is executed, not stored");
    }
}
