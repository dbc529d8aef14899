//! `file.cp.ei.telekom.de/v1` `FileExposure` (CRD `file.cp.ei.telekom.de_fileexposures.yaml`).
//!
//! Also home of the SFTP types FileSubscription shares with it ([`Sftp`], [`SshPublicKey`]) and of
//! the file flavour of the approval settings ([`FileApprovalConfig`], whose strategy defaults to
//! `Simple`, unlike the API one).

use crate::common::{Condition, ObjectRef, TypedObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of a FileExposure (lives in its team's namespace `<env>--<group>--<team>`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "file.cp.ei.telekom.de",
    version = "v1",
    kind = "FileExposure",
    namespaced,
    status = "FileExposureStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct FileExposureSpec {
    /// `spec.fileType` (required by the CRD): the exposed file type, e.g.
    /// `de-telekom-payments-settlementreport-v1`.
    pub file_type: String,
    /// `spec.provider` (required by the CRD): the providing Application (`name`, `namespace`
    /// required; `apiVersion`, `kind` optional).
    pub provider: TypedObjectRef,
    /// `spec.variant` (required by the CRD): `sftp`.
    pub variant: String,
    /// `spec.visibility` (required by the CRD, default `Enterprise`): `World`, `Zone` or
    /// `Enterprise`.
    pub visibility: String,
    /// `spec.zone` (required by the CRD): the zone the file type is provided in.
    pub zone: ObjectRef,
    /// `spec.approval` (optional): how subscriptions are approved.
    #[serde(default)]
    pub approval: Option<FileApprovalConfig>,
    /// `spec.sftp` (optional): provider-side SFTP access.
    #[serde(default)]
    pub sftp: Option<Sftp>,
}

/// `spec.approval` of a FileExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileApprovalConfig {
    /// `spec.approval.strategy` (required by the CRD, defaulted to `Simple` by the API server and
    /// so here too): `Auto`, `Simple` or `FourEyes`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// `spec.approval.trustedTeams[]` (optional): teams whose subscriptions are auto-approved.
    #[serde(default)]
    pub trusted_teams: Vec<String>,
}

/// The CRD default of `spec.approval.strategy` of a FileExposure.
fn default_strategy() -> String {
    "Simple".to_string()
}

/// `spec.sftp` of a FileExposure or FileSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sftp {
    /// `spec.sftp.publicKeys[]` (required by the CRD inside `sftp`): SSH public keys of the SFTP
    /// user, in order.
    #[serde(default)]
    pub public_keys: Vec<SshPublicKey>,
}

/// `spec.sftp.publicKeys[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SshPublicKey {
    /// `spec.sftp.publicKeys[].key` (required by the CRD): the SSH public key value.
    pub key: String,
}

/// `status` of a FileExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileExposureStatus {
    /// `status.active` (required by the CRD): whether this is the one active exposure of its file
    /// type (oldest wins).
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.fileTypeRef` (optional): the FileType this exposure provides.
    #[serde(default)]
    pub file_type_ref: Option<ObjectRef>,
    /// `status.serviceURL` (optional): the internal SFTP service endpoint.
    #[serde(default, rename = "serviceURL")]
    pub service_url: Option<String>,
    /// `status.serviceExternalURL` (optional): the externally reachable SFTP service endpoint.
    #[serde(default, rename = "serviceExternalURL")]
    pub service_external_url: Option<String>,
}
