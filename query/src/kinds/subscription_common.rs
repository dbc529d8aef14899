//! What every subscription family (API, event, agentic, file) shares in GraphQL: the links
//! `owner`, `approval`, `approvalRequests`, `target` (the cross-tenant reduced view of the
//! linked exposure, null without error while unlinked) and the matching `where` edges
//! `hasOwner`, `hasTarget`, `hasApproval`, `hasApprovalRequests`. A family implements
//! [`SubscriptionEntity`] once; no family repeats these resolvers.

use crate::entity::{node_value, Entity};
use crate::fields::field;
use crate::filter::EdgeFilter;
use crate::kinds::edges;
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use schema::common::Meta;
use schema::keys::{index, natural};
use schema::kinds::application::Application;
use schema::kinds::approval::Approval;
use schema::kinds::approval_request::ApprovalRequest;
use schema::{Key, Kind};
use storage::Stored;

/// A subscription kind: its owner application and the exposure kind its link 0 points to.
pub trait SubscriptionEntity: Entity {
    /// The exposure kind of `target`.
    type Exposure: Entity;
    /// The GraphQL type of `target` (`ApiExposureInfo`, …).
    const TARGET_INFO: &'static str;
    /// The record's common metadata.
    fn record_meta(r: &Self::Record) -> &Meta;
    /// The owner application's name.
    fn application(r: &Self::Record) -> &str;
    /// The reduced view of a target exposure.
    fn target_info(x: Stored<<Self::Exposure as Kind>::Record>) -> FieldValue<'static>;
}

/// The owner application's natural key.
pub fn owner_key<K: SubscriptionEntity>(r: &K::Record) -> Key {
    let m = K::record_meta(r);
    natural::application(&m.environment, m.team(), K::application(r))
}

/// The lookup key of the subscription's approvals and approval requests.
pub fn approval_key<K: SubscriptionEntity>(r: &K::Record) -> Key {
    let m = K::record_meta(r);
    natural::subscription_ref(K::ID, &m.environment, &m.namespace, &m.name)
}

/// `owner: Application!`, `approval: Approval`, `approvalRequests: [ApprovalRequest!]`,
/// `target: <Family>ExposureInfo` — visible records only, except the reduced target view.
pub fn link_fields<K: SubscriptionEntity>() -> Vec<Field> {
    vec![
        field::<Stored<K::Record>>("owner", TypeRef::named_nn("Application"), |p, request| {
            Ok(request.load_visible::<Application>(&owner_key::<K>(&p.record))?.map(node_value::<Application>))
        }),
        field::<Stored<K::Record>>("approval", TypeRef::named("Approval"), |p, request| {
            let found = request
                .view
                .lookup_records::<Approval>(index::APPROVAL_BY_SUBSCRIPTION, &approval_key::<K>(&p.record))
                .map_err(crate::error::storage)?;
            Ok(found.into_iter().find(|a| request.visible::<Approval>(a)).map(node_value::<Approval>))
        }),
        field::<Stored<K::Record>>("approvalRequests", TypeRef::named_nn_list("ApprovalRequest"), |p, request| {
            let found = request
                .view
                .lookup_records::<ApprovalRequest>(index::APPROVAL_REQUEST_BY_SUBSCRIPTION, &approval_key::<K>(&p.record))
                .map_err(crate::error::storage)?;
            Ok(Some(FieldValue::list(
                found.into_iter().filter(|a| request.visible::<ApprovalRequest>(a)).map(node_value::<ApprovalRequest>),
            )))
        }),
        field::<Stored<K::Record>>("target", TypeRef::named(K::TARGET_INFO), |p, request| match p.links.first() {
            Some(Some(key)) => Ok(request.load_system::<K::Exposure>(key)?.map(K::target_info)),
            _ => Ok(None),
        }),
    ]
}

/// `hasOwner(With)`, `hasTarget(With)`, `hasApproval(With)`, `hasApprovalRequests(With)`.
pub fn link_edges<K: SubscriptionEntity>() -> Vec<EdgeFilter<K::Record>> {
    vec![
        edges::by_key::<K::Record, Application>("Owner", |s| Some(owner_key::<K>(&s.record))),
        edges::by_key::<K::Record, K::Exposure>("Target", |s| s.links.first().cloned().flatten()).shown_as_info(),
        edges::by_index::<K::Record, Approval>("Approval", index::APPROVAL_BY_SUBSCRIPTION, |s| Some(approval_key::<K>(&s.record))),
        edges::by_index::<K::Record, ApprovalRequest>("ApprovalRequests", index::APPROVAL_REQUEST_BY_SUBSCRIPTION, |s| {
            Some(approval_key::<K>(&s.record))
        }),
    ]
}
