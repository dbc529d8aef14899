//! The GraphiQL page at `/graphql` and its assets at `/graphql/assets/<file>`, all served from
//! the binary: the production builds of React and GraphiQL (versions in
//! `control-plane/assets/graphiql/VERSIONS`, licences beside them, refreshed from the npm
//! registry by `tools/graphiql/fetch-assets.sh`). The page names no URL outside the server, so
//! it works where clusters run without internet access.
//!
//! Queries need a token: GraphiQL's *Headers* editor takes
//! `{"Authorization": "Bearer <token>"}` (README "GraphiQL"); subscriptions run over a WebSocket
//! on `/graphql/query` (`graphql-transport-ws`) with those headers as `connection_init` payload.

use poem::web::Html;
use poem::{handler, Request, Response};

/// Where the assets are served.
pub const ASSETS: &str = "/graphql/assets";

/// One embedded asset.
pub struct Asset {
    /// The file name under [`ASSETS`].
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
}

/// An [`Asset`] of `control-plane/assets/graphiql/`.
macro_rules! asset {
    ($name:literal, $content_type:literal) => {
        Asset { name: $name, content_type: $content_type, bytes: include_bytes!(concat!("../../assets/graphiql/", $name)) }
    };
}

/// Every asset the page loads, and the licences of what they contain.
pub const FILES: &[Asset] = &[
    asset!("react.production.min.js", "text/javascript; charset=utf-8"),
    asset!("react-dom.production.min.js", "text/javascript; charset=utf-8"),
    asset!("graphiql.min.js", "text/javascript; charset=utf-8"),
    asset!("graphiql.min.css", "text/css; charset=utf-8"),
    asset!("LICENSE.react", "text/plain; charset=utf-8"),
    asset!("LICENSE.react-dom", "text/plain; charset=utf-8"),
    asset!("LICENSE.graphiql", "text/plain; charset=utf-8"),
    asset!("VERSIONS", "text/plain; charset=utf-8"),
];

/// The page: GraphiQL on `/graphql/query`, its scripts and styles from [`ASSETS`].
const PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="robots" content="noindex">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>ControlPlane API</title>
    <style>
      body { height: 100%; margin: 0; width: 100%; overflow: hidden; }
      #graphiql { height: 100vh; }
    </style>
    <link rel="icon" href="data:,">
    <link rel="stylesheet" href="/graphql/assets/graphiql.min.css">
    <script src="/graphql/assets/react.production.min.js"></script>
    <script src="/graphql/assets/react-dom.production.min.js"></script>
  </head>
  <body>
    <div id="graphiql">Loading…</div>
    <script src="/graphql/assets/graphiql.min.js"></script>
    <script>
      const url = new URL('/graphql/query', window.location.origin).toString();
      // Subscriptions: graphql-transport-ws on the same path; the Headers editor's values go
      // into connection_init.
      const subscriptionUrl = url.replace(/^http/, 'ws');
      const fetcher = GraphiQL.createFetcher({ url, subscriptionUrl, fetch: (u, opts = {}) => fetch(u, { ...opts, credentials: 'same-origin' }) });
      ReactDOM.createRoot(document.getElementById('graphiql')).render(
        React.createElement(GraphiQL, { fetcher, defaultEditorToolsVisibility: 'headers' })
      );
    </script>
  </body>
</html>
"#;

/// `GET /graphql`: the page.
#[handler]
pub fn page() -> Html<&'static str> {
    Html(PAGE)
}

/// `GET /graphql/assets/<file>`: an embedded asset (cached a day), or poem's `NotFoundError`
/// (answered as the 404 problem where the route is mounted) — for any other
/// name, one that does not decode (`%ff`) included: the raw path is compared, the assets' names
/// need no escaping.
#[handler]
pub fn asset(req: &Request) -> Result<Response, poem::error::NotFoundError> {
    let name = req.uri().path().strip_prefix(ASSETS).and_then(|p| p.strip_prefix('/')).unwrap_or_default();
    let found = FILES.iter().find(|a| a.name == name).ok_or(poem::error::NotFoundError)?;
    Ok(Response::builder().content_type(found.content_type).header("Cache-Control", "public, max-age=86400").body(found.bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every script and stylesheet the page names is an embedded asset, and the page names no
    /// URL outside the server.
    #[test]
    fn the_page_loads_only_embedded_assets() {
        assert!(!PAGE.contains("http://") && !PAGE.contains("https://") && !PAGE.contains("//unpkg"), "{PAGE}");
        let named: Vec<&str> = PAGE.split(['"', '\'']).filter(|s| s.starts_with(ASSETS)).collect();
        assert_eq!(named.len(), 4, "{named:?}");
        for path in named {
            let file = path.trim_start_matches(ASSETS).trim_start_matches('/');
            let embedded = FILES.iter().find(|a| a.name == file).unwrap_or_else(|| panic!("{path} is not embedded"));
            assert!(embedded.bytes.len() > 1000, "{path}");
        }
        for licence in ["LICENSE.react", "LICENSE.react-dom", "LICENSE.graphiql"] {
            let text = FILES.iter().find(|a| a.name == licence).map(|a| String::from_utf8_lossy(a.bytes).to_string()).unwrap();
            assert!(text.contains("MIT License") || text.contains("Permission is hereby granted"), "{licence}");
        }
    }
}
