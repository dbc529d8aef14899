//! `file.cp.ei.telekom.de/v1` `FileSubscription` (CRD
//! `file.cp.ei.telekom.de_filesubscriptions.yaml`).
//!
//! The SFTP types are shared with FileExposure ([`crate::file_exposure::Sftp`]).

use crate::common::{Condition, ObjectRef, TypedObjectRef};
use crate::file_exposure::Sftp;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of a FileSubscription (lives in the subscribing team's namespace).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "file.cp.ei.telekom.de",
    version = "v1",
    kind = "FileSubscription",
    namespaced,
    status = "FileSubscriptionStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct FileSubscriptionSpec {
    /// `spec.fileType` (required by the CRD): the subscribed file type.
    pub file_type: String,
    /// `spec.requestor` (required by the CRD): the consuming Application (`name`, `namespace`
    /// required; `apiVersion`, `kind` optional).
    pub requestor: TypedObjectRef,
    /// `spec.zone` (required by the CRD): the zone the subscriber is located in.
    pub zone: ObjectRef,
    /// `spec.sftp` (optional): consumer-side SFTP access.
    #[serde(default)]
    pub sftp: Option<Sftp>,
}

/// `status` of a FileSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSubscriptionStatus {
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.approval` (optional): the subscription's Approval.
    #[serde(default)]
    pub approval: Option<ObjectRef>,
    /// `status.approvalRequest` (optional): the current ApprovalRequest.
    #[serde(default)]
    pub approval_request: Option<ObjectRef>,
    /// `status.fileTypeRef` (optional): the subscribed FileType.
    #[serde(default)]
    pub file_type_ref: Option<ObjectRef>,
    /// `status.serviceURL` (optional): the internal SFTP service endpoint.
    #[serde(default, rename = "serviceURL")]
    pub service_url: Option<String>,
    /// `status.serviceExternalURL` (optional): the externally reachable SFTP service endpoint.
    #[serde(default, rename = "serviceExternalURL")]
    pub service_external_url: Option<String>,
}
