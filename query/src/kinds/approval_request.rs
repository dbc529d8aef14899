//! `ApprovalRequest` (reference-graphql.md §1.4): one request for approval of a subscription.
//! Same shape as `Approval` ([`super::approval`]) without `expiresat`, with its own strategy and
//! state enums, plus `approval: Approval` (the approval of the same subscription, when the
//! viewer may see it). Root query `approvalRequests` (`orderBy: [ApprovalRequestOrder!]`).

use super::approval::{shared_fields, shared_filters, state_and_subscription, state_filter, Parts};
use crate::entity::{field, node_value, Builder, Entity};
use crate::error::internal;
use crate::filter::FilterField;
use async_graphql::dynamic::{Field, TypeRef};
use schema::keys::index;
use schema::kinds::approval::Approval;
use schema::kinds::approval_request::{ApprovalRequest, ApprovalRequestRecord};
use storage::Stored;

const PARTS: Parts<ApprovalRequestRecord> =
    Parts { meta: |r| &r.meta, fields: |r| &r.fields, strategy_enum: "ApprovalRequestStrategy", state_enum: "ApprovalRequestState" };

impl Entity for ApprovalRequest {
    const TYPE: &'static str = "ApprovalRequest";
    const ROOT: Option<&'static str> = Some("approvalRequests");
    const TEAM_OWNED: bool = true;
    const SHARED_SCOPES: bool = true;
    const MULTI_ORDER: bool = true;

    fn fields(bld: &mut Builder) -> Vec<Field> {
        let mut f = shared_fields::<ApprovalRequest>(bld, |r| &r.status, PARTS);
        f.extend(state_and_subscription::<ApprovalRequest>(PARTS));
        f.push(field::<Stored<ApprovalRequestRecord>>("approval", TypeRef::named("Approval"), |p, rq| {
            let sub = &p.record.fields.subscription;
            let found = rq
                .view
                .lookup_records::<Approval>(index::APPROVAL_BY_SUBSCRIPTION, &sub.index_key(&p.record.meta.environment))
                .map_err(internal)?;
            Ok(found.into_iter().find(|a| rq.visible::<Approval>(a)).map(node_value::<Approval>))
        }));
        f
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ApprovalRequestRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![
            edges::by_key::<ApprovalRequestRecord, schema::kinds::api_subscription::ApiSubscription>("APISubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::ApiSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
            edges::by_key::<ApprovalRequestRecord, schema::kinds::event_subscription::EventSubscription>("EventSubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::EventSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
            edges::by_key::<ApprovalRequestRecord, schema::kinds::agentic_subscription::AgenticSubscription>("AgenticSubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::AgenticSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
            edges::by_key::<ApprovalRequestRecord, schema::kinds::file_subscription::FileSubscription>("FileSubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::FileSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
        ]
    }

    fn filters() -> Vec<FilterField<ApprovalRequestRecord>> {
        let mut f = shared_filters::<ApprovalRequest>(|r: &ApprovalRequestRecord| &r.status, PARTS);
        f.push(state_filter(PARTS));
        f
    }
}
