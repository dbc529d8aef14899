//! Object sources: where custom resources come from. Each source turns what it reads into
//! [`crate::projector::writer::Change`]s for the writer and reports its initial sync to
//! [`crate::readiness::Readiness`].
//!
//! Only [`manifests`] exists in this build; the kube source (watch streams) is to come.

pub mod manifests;
