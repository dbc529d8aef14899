//! The `control-plane` binary: parses the command line and dispatches. Exit codes: 0 success,
//! 1 failure (message on stderr), 2 usage error, 143 and 130 when SIGTERM or SIGINT stops a
//! `snapshot restore` or offline `snapshot export` (what it had not finished removed; a signal
//! during its final moves lets it end as it does).

#![forbid(unsafe_code)]

use clap::Parser;
use control_plane::cli::{Cli, Command, SchemaCommand, SnapshotCommand};
use control_plane::config;
use std::io::Write;
use std::process::ExitCode;

/// mimalloc instead of the system allocator: GraphQL execution and the projector allocate many
/// small, short-lived objects on several threads, where glibc malloc spent a quarter of the
/// server's CPU time (profile in BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: control_plane::Allocator = control_plane::Allocator;

fn main() -> ExitCode {
    control_plane::configure_allocator();
    let cli = Cli::parse();
    let env = |k: &str| std::env::var(k).ok();
    let format = match config::log_format(cli.log_format.as_deref(), &env) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    control_plane::logging::init(format);
    match cli.command {
        Command::Serve(args) => serve(&args),
        Command::Check(args) => check(&args.manifests, &env),
        Command::Schema { command: SchemaCommand::Print } => {
            // A reader that stops early (`| head`) is not a failure of the command.
            match std::io::stdout().lock().write_all(control_plane::http::graphql::print_schema().as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => fail(&format!("writing the schema: {e}")),
                _ => ExitCode::SUCCESS,
            }
        }
        Command::Snapshot { command } => snapshot(command),
    }
}

/// `serve`: the server until SIGTERM.
fn serve(args: &control_plane::cli::ServeArgs) -> ExitCode {
    let config = match config::load_from_process(args) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    // Light queries run on the async workers: enough of them that queries never take
    // them all (see `http::executor`).
    let workers = control_plane::http::executor::Executor::worker_threads(config.graphql.workers);
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let served = runtime.block_on(control_plane::serve(config));
    // A query thread that has not reached its next deadline check is not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("{e:#}")),
    }
}

/// `check --manifests DIR`: the report on stdout; failure when a document fails.
fn check(manifests: &std::path::Path, env: &dyn Fn(&str) -> Option<String>) -> ExitCode {
    let config = match config::check_config_from_env(env) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    match control_plane::check::check_as_configured(manifests, &config) {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            match report.print(&mut out) {
                // The reader went away (`check … | head`): not an error of the check.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => return fail(&format!("writing the report: {e}")),
                Ok(()) => {}
            }
            if report.failures() > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => fail(&e),
    }
}

/// `snapshot export|restore|verify`: what was done and the snapshot's summary on stdout.
fn snapshot(command: SnapshotCommand) -> ExitCode {
    use control_plane::snapshot as snap;
    if matches!(command, SnapshotCommand::Restore { .. } | SnapshotCommand::Export { data_dir: Some(_), .. }) {
        if let Err(e) = snap::remove_unfinished_on_termination() {
            return fail(&format!("{e:#}"));
        }
    }
    let (what, result) = match command {
        SnapshotCommand::Export { data_dir: Some(data_dir), out, .. } => ("exported", snap::export_offline(&data_dir, &out)),
        SnapshotCommand::Export { server, token, out, .. } => {
            let server = server.unwrap_or_default();
            let result = tokio::runtime::Runtime::new()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(snap::export_online(&server, token.as_deref(), &out)));
            ("exported", result)
        }
        SnapshotCommand::Restore { input, data_dir, force } => ("restored", snap::restore(&input, &data_dir, force)),
        SnapshotCommand::Verify { file, input } => ("verified", snap::verify(&file.or(input).unwrap_or_default())),
    };
    match result {
        Ok(summary) => {
            let _ = writeln!(std::io::stdout(), "{what}");
            let _ = snap::print_summary(&mut std::io::stdout().lock(), &summary);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("{e:#}")),
    }
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}
