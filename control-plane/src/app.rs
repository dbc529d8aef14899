//! Startup stage 2 (resolve: after [`crate::config::load`] parsed and validated without I/O, open
//! the store, build the clients) and the running process: [`App::start`] checks what the
//! validated [`Config`] asks for, opens the store, starts the writer and the source;
//! [`start`] additionally binds the HTTP server; [`serve`] runs until SIGTERM/Ctrl-C.
//!
//! Shutdown order: stop accepting HTTP requests, stop the source, then the writer (the commit in
//! progress finishes; queued changes are replayed from the source on the next start).

use crate::auth::Authenticator;
use crate::config::{AuthMode, Config, ConfigError, SourceConfig};
use crate::metrics::Metrics;
use crate::projector::handlers::Handlers;
use crate::projector::writer::{Change, Writer, WriterSettings};
use crate::readiness::Readiness;
use crate::source::kube as kube_source;
use crate::source::kube::{KubeMetrics, KubeSource};
use crate::source::manifests::{self, ManifestsSource, ManifestsState, SkipReport};
use anyhow::{bail, Context as _};
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
    auth: Authenticator,
    /// The secret manager client, when `secretManager.url` is set.
    secrets: Option<crate::secrets::SecretManager>,
    /// The mutations' writes, when `mutations.enabled` is set on the kube source.
    commands: Option<crate::commands::KubeCommands>,
    source: Option<Source>,
    writer: Option<Writer>,
    /// The catalogue search index (`DATA_DIR/search/`), registered with the store.
    catalogue: storage::search::Catalogue,
    /// Set once when the process shuts down: GraphQL requests in flight stop.
    shutdown: Arc<std::sync::atomic::AtomicBool>,
    /// Held while the server runs: no restore replaces its store, no other server opens it.
    _data_dir_lock: crate::snapshot::DataDirLock,
}

/// The running source.
enum Source {
    Manifests(ManifestsSource),
    Kube(KubeSource),
}

impl Source {
    fn shutdown(self) {
        match self {
            Source::Manifests(s) => s.shutdown(),
            Source::Kube(s) => s.shutdown(),
        }
    }
}

impl App {
    /// Resolves `config`: refuses jwt mode without a trusted issuer, warns loudly in mock mode
    /// (and notes it in `/readyz`), sets up token verification (keys are fetched in the
    /// background, see [`crate::auth`]), opens (creating) `storage.dataDir/readmodel.redb`,
    /// starts the writer thread and the source. Returns immediately; see [`App::readiness`] for
    /// the initial sync.
    ///
    /// The kube source needs a tokio runtime: call this from a blocking thread of one
    /// (`spawn_blocking`), where it builds the Kubernetes client with `Handle::block_on` (it
    /// panics in an async context); [`start`] builds the client before and calls
    /// [`App::start_with`].
    ///
    /// # Errors
    /// A message for: jwt mode (no trusted issuer, no crypto backend, no HTTP client), a data
    /// directory in use by another process (a server or a restore holds its lock), a store that
    /// cannot be opened (locked, other layout version, I/O), a manifests path that
    /// is not a readable directory, a kube source without runtime or Kubernetes configuration.
    pub fn start(config: Config) -> anyhow::Result<App> {
        App::start_with(config, None)
    }

    /// [`App::start`] with the Kubernetes client of the kube source already built (`None` for
    /// the manifests source, or to build it here).
    ///
    /// A store that completed an initial sync of the same source before (`storage::sync`) is
    /// served at once (ready) while the source is read again behind it (`catchingUp`), unless
    /// `source.serveWhileCatchingUp` is off; any other store is ready once its initial sync is
    /// applied.
    ///
    /// # Errors
    /// As [`App::start`].
    pub fn start_with(config: Config, cluster: Option<kube_source::Cluster>) -> anyhow::Result<App> {
        preflight(&config)?;
        check_before_open(&config)?;
        let cluster = match (&config.source, cluster) {
            (SourceConfig::Kube(k), None) => {
                let runtime = tokio::runtime::Handle::try_current().context("the kube source needs a tokio runtime")?;
                Some(runtime.block_on(kube_source::connect(k)).map_err(kube_error)?)
            }
            (_, cluster) => cluster,
        };
        let identity = match (&config.source, &cluster) {
            (SourceConfig::Kube(_), Some(c)) => kube_source::source_identity(&c.url),
            (SourceConfig::Manifests(dir), _) => manifests::source_identity(dir),
            (SourceConfig::Kube(_), None) => unreachable!("the kube client is built above"),
        };
        let data_dir = &config.storage.data_dir;
        std::fs::create_dir_all(data_dir).with_context(|| format!("creating the data directory {}", data_dir.display()))?;
        let data_dir_lock = crate::snapshot::lock_data_dir(data_dir)?;
        let store = Store::open_with_cache(&config.storage.data_dir, config.storage.cache_size)
            .with_context(|| format!("opening the store in {}", config.storage.data_dir.display()))?;
        store.set_history(config.history);
        // Derived data: rebuilt here from the store when missing or stale (ARCHITECTURE.md,
        // `storage` "Catalogue search").
        let search_dir = config.storage.data_dir.join(storage::search::SEARCH_DIR);
        let (catalogue, _) = storage::search::Catalogue::open(&search_dir, &store)
            .with_context(|| format!("opening the search index in {}", search_dir.display()))?;
        let metrics = Metrics::new();
        let auth = Authenticator::new(&config.security, metrics.registry()).context("setting up authentication")?;
        let secrets =
            crate::secrets::SecretManager::new(&config.secret_manager, metrics.registry()).context("setting up the secret manager")?;
        let handlers = handlers_of(&config, &store);
        let watched: Vec<kube_source::WatchedKind> =
            kube_source::resources().into_iter().filter(|w| w.kind.enabled(&config.features)).collect();
        let readiness = readiness_of(&config.source, &handlers, &watched);
        metrics.follow(&readiness, Some(&catalogue));
        let warm = follow_store(&readiness, &store, &catalogue, &identity, config.serve_while_catching_up)?;
        if auth.mode() == AuthMode::Mock {
            readiness.note("authentication is in mock mode: token signatures and issuers are not verified (local use only)");
        }
        let commands = mutation_commands(&config, cluster.as_ref(), &store, &metrics)?;
        let writer_settings = WriterSettings {
            prebuild_orders: config.storage.prebuild_orders,
            features: config.features,
            ..WriterSettings::new(config.projector, config.clock())
        };
        let writer =
            Writer::spawn(store.clone(), metrics.clone(), readiness.clone(), writer_settings).context("starting the writer thread")?;
        let start = SourceStart { config: &config, store: &store, writer: &writer, readiness: &readiness, metrics: &metrics, handlers };
        let source = match (&config.source, cluster) {
            (SourceConfig::Manifests(dir), _) => Source::Manifests(start.manifests(dir)?),
            (SourceConfig::Kube(k), Some(cluster)) => Source::Kube(start.kube(k, cluster, watched, warm)?),
            (SourceConfig::Kube(_), None) => unreachable!("the kube client is built above"),
        };
        Ok(App {
            config,
            store,
            metrics,
            readiness,
            auth,
            secrets,
            commands,
            source: Some(source),
            writer: Some(writer),
            catalogue,
            shutdown: Arc::default(),
            _data_dir_lock: data_dir_lock,
        })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Waits until the server is ready (`/readyz` 200) or `timeout` passes; returns whether it
    /// is. Checks again after each change the server reports ([`Metrics::subscribe`]).
    pub async fn wait_ready(&self, timeout: std::time::Duration) -> bool {
        let readiness = &self.readiness;
        readiness.is_ready() || self.metrics.wait_until(timeout, |_| readiness.is_ready()).await
    }

    /// Waits until the initial sync is applied and the search index has caught up with it (on
    /// a warm start, later than ready: once nothing is catching up) or `timeout` passes; returns
    /// whether it is. Checks again after each change the server reports.
    pub async fn wait_caught_up(&self, timeout: std::time::Duration) -> bool {
        let readiness = &self.readiness;
        readiness.is_settled() || self.metrics.wait_until(timeout, |_| readiness.is_settled()).await
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

    /// The authenticator of `security.mode` (used by the GraphQL endpoint).
    pub fn authenticator(&self) -> &Authenticator {
        &self.auth
    }

    /// The secret manager client; `None` when `secretManager.url` is unset.
    pub fn secret_manager(&self) -> Option<&crate::secrets::SecretManager> {
        self.secrets.as_ref()
    }

    /// The mutations' command sink; `None` when mutations are disabled (`mutations.enabled`
    /// off, or the manifests source).
    pub fn command_sink(&self) -> Option<Arc<dyn query::commands::CommandSink>> {
        self.commands.as_ref().map(crate::commands::KubeCommands::sink)
    }

    /// Every currently skipped document of the manifests source, with its reason (empty for
    /// the kube source, which logs its skips and counts them as outcome `skip`).
    pub fn skips(&self) -> Vec<SkipReport> {
        match &self.source {
            Some(Source::Manifests(s)) => s.skips(),
            _ => Vec::new(),
        }
    }

    /// The flag that stops GraphQL requests in flight (set by [`Running::shutdown`]).
    pub fn shutdown_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.shutdown.clone()
    }

    /// The HTTP routes: GraphQL (from `http::graphql`), `/healthz`, `/readyz`, `/metrics`.
    pub fn routes(&self) -> poem::Route {
        crate::http::routes(self)
    }

    /// Stops the source (its tasks dropped), then the writer (after its commit in progress).
    /// Blocking. The store closes once the last handle of it is dropped: [`Running::shutdown`]
    /// waits for that.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        // The writer first: a source waiting for room in its queue must not wait for the writer
        // to write a whole block (seconds on a large first load).
        if let Some(w) = &self.writer {
            w.begin_shutdown();
        }
        if let Some(s) = self.source.take() {
            s.shutdown();
        }
        if let Some(w) = self.writer.take() {
            w.shutdown();
        }
        // After the writer: the index commits the last store revision it was told.
        self.catalogue.shutdown();
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long [`Running::shutdown`] waits for the last handle of the store to be dropped (a
/// query still running on a heavy thread stops at its next deadline check).
pub const STORE_RELEASE_WAIT: Duration = Duration::from_secs(10);

/// A started process: the [`App`] plus the HTTP server.
pub struct Running {
    app: App,
    addr: SocketAddr,
    stop: Arc<Notify>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Logs the moment the server turns ready (holds the readiness state until then).
    ready_log: tokio::task::JoinHandle<()>,
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

    /// Graceful shutdown: stop accepting requests, stop the GraphQL requests in flight (they
    /// answer `UNAVAILABLE` at their next deadline check; connections get at most 5 s to
    /// finish), then stop the projector (the writer finishes its commit in progress) and wait
    /// until the store is closed (at most [`STORE_RELEASE_WAIT`]): once this returns, the data
    /// directory can be opened again.
    ///
    /// # Errors
    /// The server's I/O error, if it failed.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.app.shutdown.store(true, std::sync::atomic::Ordering::SeqCst);
        self.stop.notify_one();
        self.ready_log.abort();
        let _ = self.ready_log.await;
        let served = self.server.await;
        let app = self.app;
        tokio::task::spawn_blocking(move || {
            let store = app.store.clone();
            app.shutdown();
            if let Err(e) = store.close(STORE_RELEASE_WAIT) {
                tracing::error!(error = %e, "the store is not closed at shutdown: something outlived the server");
            }
        })
        .await
        .context("stopping the projector")?;
        match served {
            Ok(r) => r.context("HTTP server"),
            Err(e) => Err(anyhow::anyhow!("HTTP server task failed: {e}")),
        }
    }
}

/// What this build refuses before anything is opened or bound: jwt mode without a trusted
/// issuer (or in a build without a JWT crypto backend). The issuers are not contacted here.
///
/// # Errors
/// A message naming the setting and what to use instead.
fn preflight(config: &Config) -> anyhow::Result<()> {
    match config.security.mode {
        AuthMode::Jwt if config.security.trusted_issuers.is_empty() => bail!(ConfigError::NoTrustedIssuer),
        AuthMode::Jwt => crate::auth::check_jwt_support()?,
        AuthMode::Mock => {}
    }
    match &config.source {
        // Nothing to refuse before I/O: the Kubernetes configuration is loaded (and a missing
        // one reported, see `kube_error`) when the source is resolved.
        SourceConfig::Kube(_) => Ok(()),
        SourceConfig::Manifests(_) => Ok(()),
    }
}

/// The mutations' writes: with the kube source when `mutations.enabled` is on; the manifests
/// source ignores the setting (said in the log), every mutation answering "mutations are disabled".
///
/// # Errors
/// The mutations cannot be set up (`crate::commands::KubeCommands::new`).
fn mutation_commands(
    config: &Config,
    cluster: Option<&kube_source::Cluster>,
    store: &Store,
    metrics: &Metrics,
) -> anyhow::Result<Option<crate::commands::KubeCommands>> {
    match (&config.source, cluster, config.mutations.enabled) {
        (SourceConfig::Kube(_), Some(cluster), true) => Ok(Some(
            crate::commands::KubeCommands::new(
                cluster.client.clone(),
                store.clone(),
                metrics.clone(),
                config.mutations,
                &config.rover_server,
            )
            .context("setting up mutations")?,
        )),
        (SourceConfig::Manifests(_), _, true) => {
            tracing::warn!("mutations.enabled is ignored with the manifests source: every mutation answers \"mutations are disabled\"");
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// What is checked and said before the store opens: a loud warning in mock mode, and a manifests
/// path that is not a readable directory refused (naming `source.manifests`), and a data
/// directory path that names something other than a directory (naming `storage.dataDir`).
fn check_before_open(config: &Config) -> anyhow::Result<()> {
    if config.security.mode == AuthMode::Mock {
        tracing::warn!(
            "AUTHENTICATION IS IN MOCK MODE: token signatures and issuers are NOT verified; anyone can claim any team. \
             Use only for local development and demos."
        );
    }
    if let SourceConfig::Manifests(dir) = &config.source {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("the manifests path {} is not a directory (source.manifests)", dir.display()),
            Err(e) => bail!("cannot read the manifests directory {} (source.manifests): {e}", dir.display()),
        }
    }
    let data_dir = &config.storage.data_dir;
    if std::fs::metadata(data_dir).is_ok_and(|m| !m.is_dir()) {
        bail!("the data directory {} is not a directory (storage.dataDir)", data_dir.display());
    }
    Ok(())
}

/// The translation handlers of every kind, for the features and document size of `config` and
/// the store's compression dictionaries; kinds switched off by a feature flag are logged as not
/// projected.
fn handlers_of(config: &Config, store: &Store) -> Arc<Handlers> {
    let dictionaries = match &config.source {
        // Trained by the scan's thread that reads the last sample: the scan's other threads go on.
        SourceConfig::Manifests(_) => store.dictionaries(),
        // The kube source encodes on the async runtime's threads, which must not wait.
        SourceConfig::Kube(_) => store.dictionaries().training_in_background(),
    };
    let handlers = Handlers::new(&config.features).with_max_document_bytes(config.max_document_bytes).with_dictionaries(dictionaries);
    for (kind, enabled) in handlers.kinds() {
        if !enabled {
            tracing::info!(kind = kind.name(), "kind switched off by a feature flag: not projected");
        }
    }
    Arc::new(handlers)
}

/// The readiness of a source: its initial phase, and one tracked phase per enabled kind (the
/// manifests source's kinds by its handlers, the kube source's by its watched kinds).
fn readiness_of(source: &SourceConfig, handlers: &Handlers, watched: &[kube_source::WatchedKind]) -> Readiness {
    match source {
        SourceConfig::Manifests(dir) => {
            let r = Readiness::new([manifests::initial_phase(dir)]);
            let enabled = handlers.kinds().into_iter().filter(|(_, on)| *on);
            r.track_kinds(enabled.map(|(k, _)| (k.name().to_string(), manifests::initial_phase(dir))));
            r
        }
        SourceConfig::Kube(_) => {
            let r = Readiness::new(watched.iter().map(|w| kube_source::initial_phase(w.kind)));
            r.track_kinds(watched.iter().map(|w| (w.kind.name().to_string(), kube_source::initial_phase(w.kind))));
            r
        }
    }
}

/// Records the source `identity` in the store and ties readiness to the store: a warm start
/// (the store completed a sync of this source) serves at once unless `serve_while_catching_up`
/// is off; kinds being re-derived and the search index must catch up before ready. Returns
/// whether the start is warm.
///
/// # Errors
/// The store cannot record the source.
fn follow_store(
    readiness: &Readiness,
    store: &Store,
    catalogue: &storage::search::Catalogue,
    identity: &str,
    serve_while_catching_up: bool,
) -> anyhow::Result<bool> {
    let warm = store.follow_source(identity).context("recording the source in the store")?;
    match (warm, serve_while_catching_up) {
        (true, true) => {
            tracing::info!(source = %identity, "warm start: the store completed a sync of this source; serving it now and reading the source again behind it");
            readiness.serve_warm();
        }
        (true, false) => {
            tracing::info!(source = %identity, "source.serveWhileCatchingUp is off: unready until the source has been read again")
        }
        (false, _) => tracing::info!(source = %identity, "cold start: ready once the initial sync of this source is applied"),
    }
    let reporting = store.clone();
    readiness.report_rederiving(move || reporting.rederivations().iter().map(|k| k.name().to_string()).collect());
    // A kind whose derivation version changed was purged on open ([`storage::versions`]):
    // ready once the source brought it back and the writer ended its re-derivation.
    let rederiving = store.rederiving();
    if !rederiving.is_empty() {
        let names: Vec<&str> = rederiving.iter().map(|k| k.name()).collect();
        tracing::warn!(kinds = ?names, "re-deriving kinds whose derivation version changed: every object of theirs is read again from the source");
        let (leader, follower) = (store.clone(), store.clone());
        readiness.follow(
            &format!("re-derivation of {}", names.join(", ")),
            // At least 1: the follower's 0 (still re-deriving) must never reach the target.
            move || leader.read().and_then(|v| v.revision()).unwrap_or(0).max(1),
            move || if follower.rederiving().is_empty() { u64::MAX } else { 0 },
        );
    }
    let searching = catalogue.clone();
    readiness.report_search_failure(move || searching.failure());
    // Ready means searchable: the index has caught up with the initial sync.
    let (leader, follower) = (store.clone(), catalogue.clone());
    readiness.follow("search index", move || leader.read().and_then(|v| v.revision()).unwrap_or(0), move || follower.revision());
    Ok(warm)
}

/// What starting a source needs from the process being started.
struct SourceStart<'a> {
    config: &'a Config,
    store: &'a Store,
    writer: &'a Writer,
    readiness: &'a Readiness,
    metrics: &'a Metrics,
    handlers: Arc<Handlers>,
}

impl SourceStart<'_> {
    /// Starts the manifests source on `dir`. A store that lacks source documents (written by an
    /// earlier release) drops its checkpoints first: every file is read once.
    fn manifests(self, dir: &std::path::Path) -> anyhow::Result<ManifestsSource> {
        let SourceStart { config, store, writer, readiness, metrics, handlers } = self;
        if store.filling_documents() {
            // Unchanged files taken over from their checkpoints would not hand over their
            // objects' documents: read every file once.
            let dropped = store.drop_checkpoints("manifests/").context("dropping the manifests checkpoints")?;
            tracing::info!(
                checkpoints = dropped,
                "the store lacks source documents (written by an earlier release): every file is read once to keep them"
            );
        }
        let state = ManifestsState::new(dir, handlers, config.features, config.clock())
            .with_max_file_bytes(config.max_file_bytes as u64)
            .with_checkpoints(store.clone());
        let source = ManifestsSource::spawn(dir, state, writer.sender(), readiness.clone(), metrics.clone(), manifests::POLL_INTERVAL)
            .map_err(anyhow::Error::msg)?;
        tracing::info!(manifests = %dir.display(), data_dir = %config.storage.data_dir.display(), "projector started (manifests source)");
        Ok(source)
    }

    /// Starts the kube source: a watch of every kind in `watched`; the records of kinds switched
    /// off (from a run with the flag on) are swept once, as the manifests source sweeps every
    /// kind it did not read.
    ///
    /// # Errors
    /// No tokio runtime, or the source's metrics cannot be registered.
    fn kube(
        self,
        source: &crate::config::KubeSourceConfig,
        cluster: kube_source::Cluster,
        watched: Vec<kube_source::WatchedKind>,
        warm: bool,
    ) -> anyhow::Result<KubeSource> {
        let SourceStart { config, store, writer, readiness, metrics, handlers } = self;
        let runtime = tokio::runtime::Handle::try_current().context("the kube source needs a tokio runtime")?;
        let kube_metrics = KubeMetrics::register(metrics).map_err(anyhow::Error::msg)?;
        let wiring = kube_source::Wiring {
            handlers,
            features: config.features,
            clock: config.clock(),
            sender: writer.sender(),
            readiness: readiness.clone(),
            metrics: metrics.clone(),
            kube_metrics,
            settings: kube_source::Settings::new(&config.projector),
            warm,
            lists: kube_source::ListBudget::new(store.read().and_then(|v| v.record_counts()).unwrap_or_default()),
        };
        tracing::info!(
            api_server = source.url.as_deref().unwrap_or("(kubeconfig or in cluster)"),
            data_dir = %config.storage.data_dir.display(),
            kinds = ?watched.iter().map(|w| w.kind.name()).collect::<Vec<_>>(),
            "projector started (kube source)"
        );
        let off: Vec<_> = kube_source::resources().into_iter().map(|w| w.kind).filter(|k| !watched.iter().any(|w| w.kind == *k)).collect();
        if !off.is_empty() {
            writer.sender().send(Change::Sweep { kinds: off, present: Arc::default(), keep_newer_than: None, report: None, token: None });
        }
        Ok(KubeSource::spawn(cluster.client, watched, wiring, &runtime))
    }
}

/// The message of a kube source that cannot start.
fn kube_error(e: kube_source::ConnectError) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot start the kube source: {e}. Run inside a cluster, provide a kubeconfig (KUBECONFIG or ~/.kube/config), \
         set the API server URL (--kube-url / CP_SOURCE_KUBE_URL / source.kubeUrl), or read manifests instead (--manifests DIR)"
    )
}

/// Starts the projector and binds the HTTP server on `server.address`.
///
/// # Errors
/// Everything [`App::start`] reports, and an address that cannot be bound.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    let started = std::time::Instant::now();
    preflight(&config)?;
    // The source's configuration first: a missing kubeconfig is the more useful message.
    let cluster = match &config.source {
        SourceConfig::Kube(k) => Some(kube_source::connect(k).await.map_err(kube_error)?),
        SourceConfig::Manifests(_) => None,
    };
    let address = config.server.address.clone();
    let listener = crate::http::server::bind(&address).await.with_context(|| format!("cannot listen on {address} (server.address)"))?;
    let addr = listener.local_addr().with_context(|| format!("no socket address for {address}"))?;
    let limits = crate::http::server::ConnectionLimits::of(&config.server);
    let app = tokio::task::spawn_blocking(move || App::start_with(config, cluster)).await.context("starting")??;
    let routes = app.routes();
    let stop = Arc::new(Notify::new());
    let signal = {
        let stop = stop.clone();
        async move { stop.notified().await }
    };
    let server = tokio::spawn(crate::http::server::serve(listener, routes, limits, app.metrics().clone(), signal, Duration::from_secs(5)));
    tracing::info!(address = %addr, "listening");
    // One line when `/readyz` turns 200, for operators reading the log.
    let (readiness, metrics) = (app.readiness().clone(), app.metrics().clone());
    let ready_log = tokio::spawn(async move {
        let mut changes = metrics.subscribe();
        while !readiness.is_ready() {
            if changes.changed().await.is_err() {
                return;
            }
        }
        if !readiness.is_warm() {
            tracing::info!(
                ms = started.elapsed().as_millis() as u64,
                "ready: the initial sync is applied and the search index has caught up"
            );
            return;
        }
        tracing::info!(ms = started.elapsed().as_millis() as u64, catching_up = ?readiness.catching_up(), "ready (warm start): serving the stored read model while catching up");
        while !readiness.is_settled() {
            if changes.changed().await.is_err() {
                return;
            }
        }
        tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "caught up: the initial sync is applied and the search index has caught up"
        );
    });
    Ok(Running { app, addr, stop, server, ready_log })
}

/// Runs the server until SIGTERM or SIGINT (Ctrl-C), then shuts down gracefully. Both are
/// listened for before the server starts: one that comes while it starts (a warm start can be
/// ready before its start returns) is taken once the start ends.
///
/// # Errors
/// The signals cannot be listened for, startup failures (see [`start`]) and server I/O errors.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let running = start(config).await?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("shutting down");
    running.shutdown().await?;
    tracing::info!("stopped");
    Ok(())
}
