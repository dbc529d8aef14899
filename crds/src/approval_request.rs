//! `approval.cp.ei.telekom.de/v1` `ApprovalRequest` (CRD
//! `approval.cp.ei.telekom.de_approvalrequests.yaml`).
//!
//! Requester, decider, decisions and transitions are the types of [`crate::approval`]; the spec
//! differs from an Approval's only by lacking `approvedRequest`, the status by a required
//! `approval` reference and no `expiresAt`.

use crate::approval::approval_struct;
use crate::common::ObjectRef;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

approval_struct!(spec
    /// `spec` of an ApprovalRequest.
    #[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[kube(
        group = "approval.cp.ei.telekom.de",
        version = "v1",
        kind = "ApprovalRequest",
        namespaced,
        status = "ApprovalRequestStatus",
        schema = "disabled"
    )]
    ApprovalRequestSpec {}
);

approval_struct!(status
    /// `status` of an ApprovalRequest.
    ApprovalRequestStatus {
        /// `status.approval` (required by the CRD): the Approval of the same subscription.
        pub approval: ObjectRef,
    }
);
