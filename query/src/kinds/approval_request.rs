//! `ApprovalRequest`: one request for approval of a subscription.
//! Same shape as `Approval` ([`super::approval`]) without `expiresat`, with its own strategy and
//! state enums, plus `approval: Approval` (the approval of the same subscription, when the
//! viewer may see it). Root query `approvalRequests` (`orderBy: [ApprovalRequestOrder!]`).

use super::approval::{shared_columns, shared_edge_filters, shared_fields, ApprovalEntity};
use crate::column::Column;
use crate::connection::register_entity;
use crate::entity::{Builder, Entity, node_value};
use crate::fields::field;
use crate::filter::EdgeFilter;
use async_graphql::dynamic::{Field, TypeRef};
use schema::common::Meta;
use schema::keys::index;
use schema::kinds::approval::Approval;
use schema::kinds::approval_common::{ApprovalFields, ApprovalState};
use schema::kinds::approval_request::{ApprovalRequest, ApprovalRequestRecord};
use storage::Stored;

impl ApprovalEntity for ApprovalRequest {
    const STRATEGY_ENUM: &'static str = "ApprovalRequestStrategy";
    const STATE_ENUM: &'static str = "ApprovalRequestState";
    const STATES: usize = ApprovalState::REQUEST_VALUES.len();

    fn record_meta(r: &ApprovalRequestRecord) -> &Meta {
        &r.meta
    }

    fn approval(r: &ApprovalRequestRecord) -> &ApprovalFields {
        &r.fields
    }
}

impl Entity for ApprovalRequest {
    const TYPE: &'static str = "ApprovalRequest";
    const ROOT: Option<&'static str> = Some("approvalRequests");
    const TEAM_OWNED: bool = true;
    const SHARED_SCOPES: bool = true;
    const MULTI_ORDER: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        let mut f = shared_fields::<ApprovalRequest>(builder);
        f.push(field::<Stored<ApprovalRequestRecord>>("approval", TypeRef::named("Approval"), |p, request| {
            let sub = &p.record.fields.subscription;
            let found = request
                .view
                .lookup_records::<Approval>(index::APPROVAL_BY_SUBSCRIPTION, &sub.index_key(&p.record.meta.environment))
                .map_err(crate::error::storage)?;
            Ok(found.into_iter().find(|a| request.visible::<Approval>(a)).map(node_value::<Approval>))
        }));
        f
    }

    fn columns() -> Vec<Column<ApprovalRequestRecord>> {
        shared_columns::<ApprovalRequest>()
    }

    fn edge_filters() -> Vec<EdgeFilter<ApprovalRequestRecord>> {
        shared_edge_filters::<ApprovalRequest>()
    }
}

/// Registers `ApprovalRequest`: its type, connection and root query.
pub fn register(builder: &mut Builder) {
    register_entity::<ApprovalRequest>(builder);
}
