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

#![deny(unsafe_code)]

pub mod app;
pub mod auth;
pub mod check;
pub mod cli;
pub mod commands;
pub mod config;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod projector;
pub mod readiness;
pub mod secrets;
pub mod snapshot;
pub mod source;

pub use app::{serve, start, App, Running};
pub use config::Config;

/// The global allocator of the binary (mimalloc). Benches that run the server in their own
/// process declare it too, so they measure what the binary does:
/// `#[global_allocator] static A: control_plane::Allocator = control_plane::Allocator;`
///
/// Built without transparent huge pages (mimalloc's `no_thp`): with them, memory freed after a
/// restart's check of a million objects stayed resident in 2 MiB pages (P4 at 1M: 335 MB at
/// ready with, 280 MB without; the other benches measured the same either way).
pub use mimalloc::MiMalloc as Allocator;

/// mimalloc's `mi_option_purge_delay` (milliseconds before freed memory is handed back to the
/// operating system; 1000 by default in the bundled v3): the option before `use_numa_nodes` in
/// `mimalloc.h` (v2 and v3), which `libmimalloc-sys` does not name.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = libmimalloc_sys::mi_option_use_numa_nodes - 1;

/// Makes the [`Allocator`] hand memory back to the operating system as soon as it is free,
/// rather than a second later and only once the freeing thread allocates again: the server has
/// many threads (the query executor's blocking pool, the writer, the source), and an idle
/// thread would otherwise keep what its last job freed. Called once at start, before the
/// server's threads are (the binary's `main`).
pub fn configure_allocator() {
    // SAFETY: `mi_option_set` has no preconditions: it stores an option's value, read by later
    // purges; a purge delay of 0 is a documented value ("use 0 for immediate purging").
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0)
    }
}

/// Returns the memory [`Allocator`] holds free to the operating system now, rather than after
/// its purge delay: for the end of a phase of large transient allocations (the initial scan), so
/// that the resident size afterwards is the working set. Costs a few milliseconds; does nothing
/// for memory of another allocator.
pub fn release_free_memory() {
    // SAFETY: `mi_collect` has no preconditions (it walks mimalloc's own heaps and returns their
    // free pages to the OS); it is safe to call from any thread at any time. With
    // `configure_allocator`, the project's only `unsafe`: the library crates forbid it
    // (`#![forbid(unsafe_code)]`, checked by tests/architecture.rs); this crate denies it but
    // in these two calls into the allocator.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_collect(true)
    }
}
