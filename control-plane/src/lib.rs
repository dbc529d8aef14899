//! The ControlPlane read model server: CLI and configuration, the projector runtime (sources,
//! writer, retries), the HTTP server (GraphQL, health, readiness, metrics).
//!
//! Start reading at [`app`] (startup and shutdown), then [`projector`] (the generic pipeline)
//! and the sources, [`source::manifests`] and [`source::kube`].
//!
//! **Architecture invariants:** this is the only crate that touches HTTP, environment variables,
//! the file system of sources and the wall clock. No kind has code of its own here: everything is
//! generic over [`schema::Kind`] through [`schema::registry`]. All store writes go through the one
//! writer ([`projector::writer`]). Bad input is a logged, counted skip, never a crash.

pub mod app;
pub mod auth;
pub mod check;
pub mod cli;
pub mod config;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod projector;
pub mod readiness;
pub mod snapshot;
pub mod source;

pub use app::{serve, start, App, Running};
pub use config::Config;

/// The global allocator of the binary (mimalloc). Benches that run the server in their own
/// process declare it too, so they measure what the binary does:
/// `#[global_allocator] static A: control_plane::Allocator = control_plane::Allocator;`
pub use mimalloc::MiMalloc as Allocator;
