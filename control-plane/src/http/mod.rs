//! The HTTP surface (poem): GraphQL from [`graphql`], plus `/healthz` (liveness), `/readyz`
//! (initial sync done; 503 with a JSON body naming what is pending before that) and `/metrics`
//! (Prometheus text format).

pub mod admin;
pub mod executor;
pub mod export;
pub mod graphiql;
pub mod graphql;
pub mod server;
pub mod subscriptions;

use crate::app::App;
use poem::endpoint::make_sync;
use poem::http::StatusCode;
use poem::Response;

/// Every route of the server.
pub fn routes(app: &App) -> poem::Route {
    let readiness = app.readiness().clone();
    let scraped = readiness.clone();
    let metrics = app.metrics().clone();
    let data_dir = app.config().storage.data_dir.clone();
    let secrets = app.secret_manager().map(|m| m.resolver());
    let (route, graphql_state) = graphql::routes(
        app.store().clone(),
        app.config(),
        graphql::Services { secrets, commands: app.command_sink() },
        app.authenticator().clone(),
        metrics.clone(),
        readiness.clone(),
        app.shutdown_flag(),
    );
    let route = export::mount(route, graphql_state, app.config().export);
    let admin = admin::AdminEndpoint::new(app.store().clone(), app.authenticator().clone(), app.readiness().clone());
    admin::mount(route, admin)
        .at("/healthz", graphql::get_only(make_sync(|_| Response::builder().content_type("text/plain; charset=utf-8").body("ok\n"))))
        .at(
            "/readyz",
            graphql::get_only(make_sync(move |_| {
                let status = readiness.status();
                let code = if status.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                let body = serde_json::to_string(&status).unwrap_or_else(|_| "{}".into());
                Response::builder().status(code).content_type("application/json").body(body)
            })),
        )
        .at(
            "/metrics",
            graphql::get_only(make_sync(move |_| {
                metrics.store_bytes.set(crate::metrics::dir_bytes(&data_dir) as i64);
                metrics.observe_readiness(&scraped);
                Response::builder().content_type("text/plain; version=0.0.4; charset=utf-8").body(metrics.encode())
            })),
        )
        .at("/*path", graphql::not_found)
}
