//! Object sources: where custom resources come from. Each source turns what it reads into
//! [`crate::projector::writer::Change`]s for the one writer and reports its initial sync to
//! [`crate::readiness::Readiness`]: [`manifests`] (a directory, polled) and [`kube`] (watch
//! streams of the Kubernetes API).

pub mod kube;
pub mod manifests;

use crate::readiness::Readiness;

/// Runs a source's thread `run`; when it panics (a bug, or redb meeting a damaged store), logs
/// it and records it in readiness ([`Readiness::source_stopped`]): the server is then not ready,
/// instead of serving a store that no longer follows the source.
pub(crate) fn report_failure(readiness: &Readiness, source: &str, run: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        report_panic(readiness, source, panic.as_ref());
    }
}

/// [`report_failure`] of a source's task on an async runtime: awaits `run`, and when it panics,
/// logs it and records it in readiness. A task aborted (a shutdown) is not a failure.
pub(crate) async fn report_task_failure(readiness: &Readiness, source: &str, run: impl std::future::Future<Output = ()>) {
    use futures::FutureExt;
    if let Err(panic) = std::panic::AssertUnwindSafe(run).catch_unwind().await {
        report_panic(readiness, source, panic.as_ref());
    }
}

/// Logs the panic `panic` of `source` and records it in readiness ([`report_failure`]).
fn report_panic(readiness: &Readiness, source: &str, panic: &(dyn std::any::Any + Send)) {
    let what = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic".to_string(),
    };
    let why = format!(
        "the {source} source stopped: {what}; the store no longer follows it: restart the server (restore a snapshot if the store is damaged)"
    );
    tracing::error!(source, error = %what, "{why}");
    readiness.source_stopped(why);
}
