//! `Approval`: the standing decision on a subscription. Root query
//! `approvals` (`orderBy: [ApprovalOrder!]`); visible to the subscriber's team and to the team of
//! the subscription's target exposure (the record's scopes). Also the fields and filters
//! Approval and ApprovalRequest share ([`ApprovalEntity`], [`shared_fields`], [`shared_columns`],
//! [`shared_edge_filters`]).

use super::common::mixin_columns;
use super::{edges, subscription_info};
use crate::column::Column;
use crate::connection::register_entity;
use crate::entity::{Builder, Entity};
use crate::fields::{field, object_values, record_field, string_list};
use crate::request::RequestContext;
use crate::filter::EdgeFilter;
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use async_graphql::Error;
use schema::common::Meta;
use schema::kinds::agentic_subscription::AgenticSubscription;
use schema::kinds::api_subscription::ApiSubscription;
use schema::kinds::approval::{Approval, ApprovalRecord};
use schema::kinds::approval_common::{ApprovalFields, ApprovalState};
use schema::kinds::event_subscription::EventSubscription;
use schema::kinds::file_subscription::FileSubscription;
use schema::{GraphqlEnum, KindId};
use storage::Stored;

/// What Approval and ApprovalRequest share: how their records are read, and their enums.
pub trait ApprovalEntity: Entity {
    /// The strategy enum (`ApprovalStrategy` / `ApprovalRequestStrategy`).
    const STRATEGY_ENUM: &'static str;
    /// The state enum (`ApprovalState` / `ApprovalRequestState`).
    const STATE_ENUM: &'static str;
    /// How many of [`ApprovalState`]'s values, from the first, the state enum has.
    const STATES: usize;

    /// The record's metadata.
    fn record_meta(r: &Self::Record) -> &Meta;
    /// The shared approval fields.
    fn approval(r: &Self::Record) -> &ApprovalFields;
}

/// The object fields Approval and ApprovalRequest share besides their [`shared_columns`]
/// (without `id`).
pub fn shared_fields<K: ApprovalEntity>(builder: &mut Builder) -> Vec<Field> {
    super::values::register(builder);
    vec![
        record_field::<K>("requester", TypeRef::named_nn("RequesterInfo"), |r| {
            Some(FieldValue::owned_any(K::approval(r).requester.clone()))
        }),
        record_field::<K>("decider", TypeRef::named_nn("DeciderInfo"), |r| Some(FieldValue::owned_any(K::approval(r).decider.clone()))),
        record_field::<K>("decisions", TypeRef::named_nn_list_nn("Decision"), |r| object_values(K::approval(r).decisions.clone())),
        record_field::<K>("availableTransitions", TypeRef::named_nn_list("AvailableTransition"), |r| {
            object_values(K::approval(r).available_transitions.clone())
        }),
        record_field::<K>("requestedScopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
            K::approval(r).requested_scopes.as_deref().and_then(string_list)
        }),
        field::<Stored<K::Record>>("subscription", TypeRef::named_nn(subscription_info::INTERFACE), |x, request| {
            subscription(request, K::record_meta(&x.record), K::approval(&x.record))
        }),
    ]
}

/// The exposed and filterable fields Approval and ApprovalRequest share.
pub fn shared_columns<K: ApprovalEntity>() -> Vec<Column<K::Record>> {
    let mut c = mixin_columns::<K>(K::record_meta);
    c.extend([
        Column::string("action", |r| &K::approval(r).action),
        Column::enumeration("strategy", K::STRATEGY_ENUM, |r| K::approval(r).strategy),
        Column::string("deciderTeamName", |r| &K::approval(r).decider.team_name),
        Column::string("name", |r| &K::record_meta(r).name),
        Column::enumeration("state", K::STATE_ENUM, |r| K::approval(r).state).first_values(K::STATES),
    ]);
    c
}

/// The edges Approval and ApprovalRequest share: the subscription of each kind they decide.
pub fn shared_edge_filters<K: ApprovalEntity>() -> Vec<EdgeFilter<K::Record>> {
    fn subscription_of<K: ApprovalEntity>(s: &Stored<K::Record>, kind: KindId) -> Option<schema::Key> {
        let sub = &K::approval(&s.record).subscription;
        (sub.kind.kind_id() == kind).then(|| sub.key(&K::record_meta(&s.record).environment))
    }
    vec![
        edges::by_key::<K::Record, ApiSubscription>("APISubscription", |s| subscription_of::<K>(s, KindId::ApiSubscription)).shown_as_info(),
        edges::by_key::<K::Record, EventSubscription>("EventSubscription", |s| subscription_of::<K>(s, KindId::EventSubscription)).shown_as_info(),
        edges::by_key::<K::Record, AgenticSubscription>("AgenticSubscription", |s| subscription_of::<K>(s, KindId::AgenticSubscription)).shown_as_info(),
        edges::by_key::<K::Record, FileSubscription>("FileSubscription", |s| subscription_of::<K>(s, KindId::FileSubscription)).shown_as_info(),
    ]
}

/// The `SubscriptionInfo` of an approval's subscription.
///
/// # Errors
/// An error naming the approval when its subscription does not exist (as the Go server
/// answers); storage failures
/// as `INTERNAL`.
fn subscription(request: &RequestContext, meta: &Meta, fields: &ApprovalFields) -> Result<Option<FieldValue<'static>>, Error> {
    match subscription_info::resolve(request, &meta.environment, &fields.subscription)? {
        Some(v) => Ok(Some(v)),
        None => Err(Error::new(format!("approval {}/{} has no related subscription", meta.namespace, meta.name))),
    }
}

impl ApprovalEntity for Approval {
    const STRATEGY_ENUM: &'static str = "ApprovalStrategy";
    const STATE_ENUM: &'static str = "ApprovalState";
    const STATES: usize = ApprovalState::ALL.len();

    fn record_meta(r: &ApprovalRecord) -> &Meta {
        &r.meta
    }

    fn approval(r: &ApprovalRecord) -> &ApprovalFields {
        &r.fields
    }
}

impl Entity for Approval {
    const TYPE: &'static str = "Approval";
    const ROOT: Option<&'static str> = Some("approvals");
    const TEAM_OWNED: bool = true;
    const SHARED_SCOPES: bool = true;
    const MULTI_ORDER: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        shared_fields::<Approval>(builder)
    }

    fn columns() -> Vec<Column<ApprovalRecord>> {
        let mut c = shared_columns::<Approval>();
        c.push(Column::optional_time("expiresat", |r: &ApprovalRecord| r.expires_at));
        c
    }

    fn edge_filters() -> Vec<EdgeFilter<ApprovalRecord>> {
        shared_edge_filters::<Approval>()
    }
}

/// Registers `Approval`: its type, connection and root query.
pub fn register(builder: &mut Builder) {
    register_entity::<Approval>(builder);
}
