//! Object sources: where custom resources come from. Each source turns what it reads into
//! [`crate::projector::writer::Change`]s for the one writer and reports its initial sync to
//! [`crate::readiness::Readiness`]: [`manifests`] (a directory, polled) and [`kube`] (watch
//! streams of the Kubernetes API).

pub mod kube;
pub mod manifests;
