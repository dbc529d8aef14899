//! Secret fields (ARCHITECTURE.md "Viewers and visibility"): `Team.teamToken`,
//! `Application.clientSecret` and `rotatedClientSecret`, `BasicAuthCredentials.password`,
//! `OAuth2ClientCredentials.clientSecret` and `clientKey`.
//!
//! What a caller gets, in this order:
//! 1. no stored value → null;
//! 2. access `obfuscated` → `**********`, reference or not, without a lookup;
//! 3. a caller that does not own the record → null (`""` where the field is non-null), without
//!    a lookup: a team never causes a lookup of a secret it cannot read;
//! 4. a value that is not a reference `$<id>` → the value;
//! 5. a reference with no [`SecretResolver`] configured → the reference itself;
//! 6. otherwise the resolver's value, or the error "failed to resolve secret <field>" with code
//!    `INTERNAL` (the cause is logged by the resolver, never sent), or `TIMEOUT` once the
//!    request's deadline passes first.
//!
//! Every access of steps 2 and 4–6 writes one audit line (target `audit`): the viewer's
//! `clientId`, the field, the record's global ID and the outcome, never the value.

use crate::fields::string;
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldFuture, FieldValue, ResolverContext, TypeRef};
use async_graphql::{Error, ErrorExtensions};
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What obfuscated callers read instead of a secret.
pub const MASK: &str = "**********";

/// The longest secret id (`$<id>`, without `$<` and `>`) looked up, in bytes; a longer
/// reference fails without a lookup.
pub const MAX_REFERENCE_BYTES: usize = 512;

/// One lookup a resolver is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretLookup {
    /// The secret id: the text between `$<` and `>` (printable ASCII without `/ ? # %`, at most
    /// [`MAX_REFERENCE_BYTES`]).
    pub id: String,
    /// The GraphQL field asking (`clientSecret`).
    pub field: &'static str,
}

/// Why a lookup gave no value; the resolver has logged the cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecretUnresolved;

/// A lookup in flight: resolves to the secret's value.
pub type Resolution = Pin<Box<dyn Future<Output = Result<String, SecretUnresolved>> + Send>>;

/// Resolves secret references `$<id>` (the server's secret manager client).
///
/// Implementations coalesce concurrent lookups of one id, cache values briefly, bound their
/// own concurrency and time, and log why a lookup failed without the value. The future must
/// not block the thread that polls it.
pub trait SecretResolver: Send + Sync + std::fmt::Debug {
    /// Looks `lookup.id` up.
    fn resolve(&self, lookup: SecretLookup) -> Resolution;
}

/// Reads a record's secret: `(owner environment, owner team, stored value)`.
pub type RecordSecret<R> = for<'a> fn(&'a R) -> (&'a str, &'a str, Option<&'a str>);

/// Where a secret field's value sits: its owner and record, and the stored value.
pub struct SecretSite<'a> {
    /// Environment of the owning record.
    pub env: &'a str,
    /// Owner team (`<group>--<team>`).
    pub team: &'a str,
    /// Global ID of the record (for the audit log).
    pub record: std::borrow::Cow<'a, str>,
    /// The stored value: plain, or a reference `$<id>`.
    pub value: Option<&'a str>,
    /// Whether the record is a past revision (`history`): its secrets are masked for every
    /// caller, never looked up.
    pub historical: bool,
}

/// The id of a reference `$<id>`; `None` for any other value.
pub fn reference_id(value: &str) -> Option<&str> {
    value.strip_prefix("$<")?.strip_suffix('>')
}

/// Whether `id` may be looked up: 1 to [`MAX_REFERENCE_BYTES`] bytes of printable ASCII
/// without `/`, `?`, `#`, `%`, `<` or `>`, and not only dots (`.` and `..` are path steps
/// that URL normalisation would take out of `v1/secrets/`).
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REFERENCE_BYTES
        && id.bytes().all(|b| b.is_ascii_graphic() && !b"/?#%<>".contains(&b))
        && !id.bytes().all(|b| b == b'.')
}

/// The path of a secret's lookup below the manager's base URL: `v1/secrets/<id>`, the id
/// percent-encoded as one path segment (unreserved characters, `:` and `@` kept).
pub fn lookup_path(id: &str) -> String {
    let mut out = String::from("v1/secrets/");
    for &b in id.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' | b'@' => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// "failed to resolve secret <field>", code `INTERNAL` (the Go server's wording).
pub fn unresolved(field: &str) -> Error {
    Error::new(format!("failed to resolve secret {field}")).extend_with(|_, e| e.set("code", "INTERNAL"))
}

fn audit(request: &RequestContext, field: &str, record: &str, outcome: &str) {
    tracing::info!(target: "audit", viewer = %request.viewer.client_id, field, record, outcome, "secret field read");
}

/// What a secret field answers before any lookup.
enum Step {
    Answer(Option<FieldValue<'static>>),
    Lookup(Arc<dyn SecretResolver>, String, String),
}

fn step(
    request: &RequestContext,
    field: &'static str,
    site: SecretSite<'_>,
    hidden: Option<&str>,
    resolver: Option<&Arc<dyn SecretResolver>>,
) -> Step {
    let Some(value) = site.value else { return Step::Answer(None) };
    if request.viewer.access == crate::viewer::Access::Obfuscated || site.historical {
        audit(request, field, &site.record, "masked");
        return Step::Answer(string(MASK));
    }
    if !request.viewer.owns(site.env, site.team) {
        return Step::Answer(hidden.and_then(string));
    }
    let (Some(id), Some(resolver)) = (reference_id(value), resolver) else {
        audit(request, field, &site.record, if reference_id(value).is_some() { "reference" } else { "plain" });
        return Step::Answer(string(value));
    };
    Step::Lookup(resolver.clone(), id.to_string(), site.record.to_string())
}

/// A failed secret field: a nullable one answers null and its error carries the field's path
/// (async-graphql's dynamic schema drops both for a resolver's error); a non-null one fails as
/// usual, which nulls its parent.
fn fail(ctx: &ResolverContext<'_>, non_null: bool, error: Error) -> Result<Option<FieldValue<'static>>, Error> {
    if non_null {
        return Err(error);
    }
    ctx.add_error(ctx.set_error_path(error.into_server_error(ctx.item.pos)));
    Ok(None)
}

/// A secret field of objects `T`: `site` says where its value sits, `hidden` is what a caller
/// who does not own the record reads (`None` = null). Resolution follows the module's rules.
pub fn secret_field<T: Any + Send + Sync>(
    name: &'static str,
    ty: TypeRef,
    hidden: Option<&'static str>,
    resolver: Option<Arc<dyn SecretResolver>>,
    site: impl for<'a> Fn(&'a T) -> SecretSite<'a> + Send + Sync + 'static,
) -> Field {
    let site = Arc::new(site);
    Field::new(name, ty, move |ctx: ResolverContext<'_>| {
        let (site, resolver) = (site.clone(), resolver.clone());
        FieldFuture::new(async move {
            let parent = ctx.parent_value.try_downcast_ref::<T>()?;
            let request = ctx.data::<RequestContext>()?;
            request.deadline.tick()?;
            let (resolver, id, record) = match step(request, name, site(parent), hidden, resolver.as_ref()) {
                Step::Answer(v) => return Ok(v),
                Step::Lookup(resolver, id, record) => (resolver, id, record),
            };
            if !is_valid_id(&id) {
                tracing::warn!(field = name, record, bytes = id.len(), "a secret reference is malformed; not looked up");
                audit(request, name, &record, "failed");
                return fail(&ctx, hidden.is_some(), unresolved(name));
            }
            let lookup = resolver.resolve(SecretLookup { id, field: name });
            // The wait uses no thread: other requests may run on this one's worker meanwhile.
            let value = match request.deadline.at() {
                Some(at) => match request.deadline.wait_outside(tokio::time::timeout_at(at.into(), lookup)).await {
                    Ok(v) => v,
                    Err(_) => {
                        audit(request, name, &record, "timeout");
                        return fail(&ctx, hidden.is_some(), request.deadline.error());
                    }
                },
                None => request.deadline.wait_outside(lookup).await,
            };
            match value {
                Ok(value) => {
                    audit(request, name, &record, "resolved");
                    request.deadline.charge(name.len() + value.len() + 6)?;
                    Ok(string(&value))
                }
                Err(SecretUnresolved) => {
                    audit(request, name, &record, "failed");
                    fail(&ctx, hidden.is_some(), unresolved(name))
                }
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_dollar_angle_brackets_around_a_bounded_printable_id() {
        assert_eq!(
            reference_id("$<poc:payments--checkout:checkout-api:clientSecret:bc8f5f7be2>"),
            Some("poc:payments--checkout:checkout-api:clientSecret:bc8f5f7be2")
        );
        assert_eq!(reference_id("plain-secret"), None);
        assert_eq!(reference_id("$<unterminated"), None);
        assert_eq!(reference_id("x$<id>"), None);
        assert!(is_valid_id("poc:team:app:clientSecret:1"));
        assert!(is_valid_id("a..b") && is_valid_id(".a"));
        for bad in ["", "../../admin", "a/b", "a?b", "a#b", "a%2Fb", "a b", "a\nb", "é", "a>b", ".", "..", "..."] {
            assert!(!is_valid_id(bad), "{bad:?}");
        }
        assert!(is_valid_id(&"x".repeat(MAX_REFERENCE_BYTES)));
        assert!(!is_valid_id(&"x".repeat(MAX_REFERENCE_BYTES + 1)));
        assert_eq!(lookup_path("poc:team:app:clientSecret:1"), "v1/secrets/poc:team:app:clientSecret:1");
        assert_eq!(lookup_path("a..b\\c[d]"), "v1/secrets/a..b%5Cc%5Bd%5D");
    }

    #[test]
    fn the_failure_names_the_field_with_code_internal() {
        let e = unresolved("clientSecret").into_server_error(Default::default());
        assert_eq!(e.message, "failed to resolve secret clientSecret");
        assert_eq!(e.extensions.unwrap().get("code"), Some(&async_graphql::Value::from("INTERNAL")));
    }
}
