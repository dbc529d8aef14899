//! Startup stage 2 (resolve, STYLE §15) and the running process: [`App::start`] checks what the
//! validated [`Config`] asks for, opens the store, starts the writer and the source;
//! [`start`] additionally binds the HTTP server; [`serve`] runs until SIGTERM/Ctrl-C.
//!
//! Shutdown order: stop accepting HTTP requests, stop the source, then the writer (the commit in
//! progress finishes; queued changes are replayed from the source on the next start).

use crate::config::{AuthMode, Config, ConfigError, SourceConfig};
use crate::metrics::Metrics;
use crate::projector::handlers::Handlers;
use crate::projector::writer::{Writer, WriterSettings};
use crate::readiness::Readiness;
use crate::source::manifests::{self, ManifestsSource, ManifestsState, SkipReport};
use anyhow::{bail, Context as _};
use poem::listener::{Acceptor, Listener, TcpListener};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use storage::Store;
use tokio::sync::Notify;

/// The projector side of the process: store, writer, source, metrics and readiness.
pub struct App {
    config: Config,
    store: Store,
    metrics: Metrics,
    readiness: Readiness,
    source: Option<ManifestsSource>,
    writer: Option<Writer>,
}

impl App {
    /// Resolves `config`: refuses what this build cannot do (kube source, JWT verification),
    /// warns loudly in mock mode, opens (creating) `storage.dataDir/readmodel.redb`, starts the
    /// writer thread and the manifests source. Returns immediately; see [`App::readiness`] for
    /// the initial sync.
    ///
    /// # Errors
    /// A message for: jwt mode (no trusted issuer, or verification not implemented yet), the
    /// kube source (not available yet), a store that cannot be opened (locked, other layout
    /// version, I/O), a manifests path that is not a readable directory.
    pub fn start(config: Config) -> anyhow::Result<App> {
        let dir = preflight(&config)?;
        if config.security.mode == AuthMode::Mock {
            tracing::warn!(
                "AUTHENTICATION IS IN MOCK MODE: token signatures and issuers are NOT verified; anyone can claim any team. \
                 Use only for local development and demos."
            );
        }
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("the manifests path {} is not a directory (source.manifests)", dir.display()),
            Err(e) => bail!("cannot read the manifests directory {} (source.manifests): {e}", dir.display()),
        }
        let store =
            Store::open(&config.storage.data_dir).with_context(|| format!("opening the store in {}", config.storage.data_dir.display()))?;
        let metrics = Metrics::new();
        let readiness = Readiness::new([manifests::initial_phase(&dir)]);
        let clock = config.clock();
        let writer = Writer::spawn(store.clone(), metrics.clone(), readiness.clone(), WriterSettings::new(config.projector, clock))
            .context("starting the writer thread")?;
        let handlers = Arc::new(Handlers::new(&config.features));
        for (kind, enabled) in handlers.kinds() {
            if !enabled {
                tracing::info!(kind = kind.name(), "kind switched off by a feature flag: not projected");
            }
        }
        let state = ManifestsState::new(&dir, handlers, config.features, clock);
        let source = ManifestsSource::spawn(&dir, state, writer.sender(), readiness.clone(), metrics.clone(), manifests::POLL_INTERVAL)
            .map_err(anyhow::Error::msg)?;
        tracing::info!(
            manifests = %dir.display(),
            data_dir = %config.storage.data_dir.display(),
            kinds = ?schema::registry::registered().iter().map(|k| k.name()).collect::<Vec<_>>(),
            "projector started"
        );
        Ok(App { config, store, metrics, readiness, source: Some(source), writer: Some(writer) })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store (a shared handle).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Readiness: ready once the initial scan is processed.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Every currently skipped document of the source, with its reason.
    pub fn skips(&self) -> Vec<SkipReport> {
        self.source.as_ref().map(ManifestsSource::skips).unwrap_or_default()
    }

    /// The HTTP routes: GraphQL (from `http::graphql`), `/healthz`, `/readyz`, `/metrics`.
    pub fn routes(&self) -> poem::Route {
        crate::http::routes(self)
    }

    /// Stops the source, then the writer (after its commit in progress). Blocking.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(s) = self.source.take() {
            s.shutdown();
        }
        if let Some(w) = self.writer.take() {
            w.shutdown();
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A started process: the [`App`] plus the HTTP server.
pub struct Running {
    app: App,
    addr: SocketAddr,
    stop: Arc<Notify>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The projector side.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// Graceful shutdown: stop accepting requests (in-flight ones get 5 s), then stop the
    /// projector.
    ///
    /// # Errors
    /// The server's I/O error, if it failed.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.stop.notify_one();
        let served = self.server.await;
        let app = self.app;
        tokio::task::spawn_blocking(move || app.shutdown()).await.context("stopping the projector")?;
        match served {
            Ok(r) => r.context("HTTP server"),
            Err(e) => Err(anyhow::anyhow!("HTTP server task failed: {e}")),
        }
    }
}

/// What this build refuses before anything is opened or bound: jwt mode (no trusted issuer, or
/// verification not implemented yet) and the kube source (not available yet). Returns the
/// manifests directory.
///
/// # Errors
/// A message naming the setting and what to use instead.
fn preflight(config: &Config) -> anyhow::Result<std::path::PathBuf> {
    match config.security.mode {
        AuthMode::Jwt if config.security.trusted_issuers.is_empty() => bail!(ConfigError::NoTrustedIssuer),
        AuthMode::Jwt => bail!("jwt verification is not implemented yet; use --auth mock (local use only: tokens are then not verified)"),
        AuthMode::Mock => {}
    }
    match &config.source {
        SourceConfig::Kube => {
            bail!("the kube source is not available in this build yet; use --manifests DIR (or CP_SOURCE_MANIFESTS / source.manifests)")
        }
        SourceConfig::Manifests(dir) => Ok(dir.clone()),
    }
}

/// Starts the projector and binds the HTTP server on `server.address`.
///
/// # Errors
/// Everything [`App::start`] reports, and an address that cannot be bound.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    preflight(&config)?;
    let address = config.server.address.clone();
    let acceptor =
        TcpListener::bind(address.clone()).into_acceptor().await.with_context(|| format!("cannot listen on {address} (server.address)"))?;
    let addr = acceptor
        .local_addr()
        .first()
        .and_then(|a| a.as_socket_addr().copied())
        .with_context(|| format!("no socket address for {address}"))?;
    let app = tokio::task::spawn_blocking(move || App::start(config)).await.context("starting")??;
    let routes = app.routes();
    let stop = Arc::new(Notify::new());
    let signal = {
        let stop = stop.clone();
        async move { stop.notified().await }
    };
    let server =
        tokio::spawn(poem::Server::new_with_acceptor(acceptor).run_with_graceful_shutdown(routes, signal, Some(Duration::from_secs(5))));
    tracing::info!(address = %addr, "listening");
    Ok(Running { app, addr, stop, server })
}

/// Runs the server until SIGTERM or Ctrl-C, then shuts down gracefully.
///
/// # Errors
/// Startup failures (see [`start`]) and server I/O errors.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let running = start(config).await?;
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
