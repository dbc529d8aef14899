//! `Approval` (reference-graphql.md §1.4): the standing decision on a subscription. Root query
//! `approvals` (`orderBy: [ApprovalOrder!]`); visible to the subscriber's team and to the team of
//! the subscription's target exposure (the record's scopes, §5.5). Also the fields and filters
//! Approval and ApprovalRequest share ([`shared_fields`], [`shared_filters`]).

use super::common::{meta_filters, status_filters};
use super::subscription_info;
use crate::entity::{
    enum_item, field, objs, rf, status_fields, string, strs, time, time_fields, time_filters, Builder, Entity, RequestContext,
};
use crate::filter::{FilterField, FilterType, FilterValue};
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use async_graphql::Error;
use schema::common::Meta;
use schema::kinds::approval::{Approval, ApprovalRecord};
use schema::kinds::approval_common::ApprovalFields;
use storage::Stored;

type S = Stored<ApprovalRecord>;

/// How the shared fields read an Approval or ApprovalRequest record.
pub struct Parts<R> {
    /// The record's metadata.
    pub meta: fn(&R) -> &Meta,
    /// The shared approval fields.
    pub fields: fn(&R) -> &ApprovalFields,
    /// The strategy enum (`ApprovalStrategy` / `ApprovalRequestStrategy`).
    pub strategy_enum: &'static str,
    /// The state enum (`ApprovalState` / `ApprovalRequestState`).
    pub state_enum: &'static str,
}

impl<R> Clone for Parts<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Parts<R> {}

/// The fields Approval and ApprovalRequest share, in reference order (without `id`).
pub fn shared_fields<K: Entity>(bld: &mut Builder, status: fn(&K::Record) -> &schema::common::Status, p: Parts<K::Record>) -> Vec<Field> {
    super::values::register(bld);
    let mut f = time_fields::<K>();
    f.extend(status_fields::<K>(bld, status));
    let (meta, fields) = (p.meta, p.fields);
    f.extend([
        rf::<K>("environment", TypeRef::named(TypeRef::STRING), move |r| string(&meta(r).environment)),
        rf::<K>("namespace", TypeRef::named_nn(TypeRef::STRING), move |r| string(&meta(r).namespace)),
        rf::<K>("action", TypeRef::named_nn(TypeRef::STRING), move |r| string(&fields(r).action)),
        rf::<K>("strategy", TypeRef::named_nn(p.strategy_enum), move |r| enum_item(fields(r).strategy.as_str())),
        rf::<K>("requester", TypeRef::named_nn("RequesterInfo"), move |r| Some(FieldValue::owned_any(fields(r).requester.clone()))),
        rf::<K>("decider", TypeRef::named_nn("DeciderInfo"), move |r| Some(FieldValue::owned_any(fields(r).decider.clone()))),
        rf::<K>("deciderTeamName", TypeRef::named_nn(TypeRef::STRING), move |r| string(&fields(r).decider.team_name)),
        rf::<K>("decisions", TypeRef::named_nn_list_nn("Decision"), move |r| objs(fields(r).decisions.clone())),
        rf::<K>("availableTransitions", TypeRef::named_nn_list("AvailableTransition"), move |r| {
            objs(fields(r).available_transitions.clone())
        }),
        rf::<K>("requestedScopes", TypeRef::named_nn_list(TypeRef::STRING), move |r| fields(r).requested_scopes.as_deref().and_then(strs)),
        rf::<K>("name", TypeRef::named_nn(TypeRef::STRING), move |r| string(&meta(r).name)),
    ]);
    f
}

/// `state` and `subscription` (they follow `expiresat` on Approval).
pub fn state_and_subscription<K: Entity>(p: Parts<K::Record>) -> Vec<Field> {
    let (meta, fields) = (p.meta, p.fields);
    vec![
        rf::<K>("state", TypeRef::named_nn(p.state_enum), move |r| enum_item(fields(r).state.as_str())),
        field::<Stored<K::Record>>("subscription", TypeRef::named_nn(subscription_info::INTERFACE), move |x, rq| {
            subscription(rq, meta(&x.record), fields(&x.record))
        }),
    ]
}

/// The `SubscriptionInfo` of an approval's subscription.
///
/// # Errors
/// An error naming the approval when its subscription does not exist (§5.6); storage failures
/// as `INTERNAL`.
fn subscription(rq: &RequestContext, meta: &Meta, fields: &ApprovalFields) -> Result<Option<FieldValue<'static>>, Error> {
    match subscription_info::resolve(rq, &meta.environment, &fields.subscription)? {
        Some(v) => Ok(Some(v)),
        None => Err(Error::new(format!("approval {}/{} has no related subscription", meta.namespace, meta.name))),
    }
}

/// The filters Approval and ApprovalRequest share (§2.2), `expiresat` excluded.
pub fn shared_filters<K: Entity>(status: fn(&K::Record) -> &schema::common::Status, p: Parts<K::Record>) -> Vec<FilterField<K::Record>> {
    let (meta, fields) = (p.meta, p.fields);
    let mut f = time_filters();
    f.extend(status_filters(&format!("{}StatusPhase", K::TYPE), status));
    f.extend(meta_filters(meta));
    f.extend([
        FilterField::new("action", FilterType::Str, false, move |x: &Stored<K::Record>| {
            FilterValue::Str(Some(fields(&x.record).action.clone()))
        }),
        FilterField::new("strategy", FilterType::Enum(p.strategy_enum.into()), false, move |x: &Stored<K::Record>| {
            FilterValue::Str(Some(fields(&x.record).strategy.as_str().to_string()))
        }),
        FilterField::new("deciderTeamName", FilterType::Str, false, move |x: &Stored<K::Record>| {
            FilterValue::Str(Some(fields(&x.record).decider.team_name.clone()))
        }),
        FilterField::new("name", FilterType::Str, false, move |x: &Stored<K::Record>| FilterValue::Str(Some(meta(&x.record).name.clone()))),
    ]);
    f
}

/// The `state` filter (ENUM).
pub fn state_filter<R: 'static>(p: Parts<R>) -> FilterField<R> {
    let fields = p.fields;
    FilterField::new("state", FilterType::Enum(p.state_enum.into()), false, move |x: &Stored<R>| {
        FilterValue::Str(Some(fields(&x.record).state.as_str().to_string()))
    })
}

const PARTS: Parts<ApprovalRecord> =
    Parts { meta: |r| &r.meta, fields: |r| &r.fields, strategy_enum: "ApprovalStrategy", state_enum: "ApprovalState" };

impl Entity for Approval {
    const TYPE: &'static str = "Approval";
    const ROOT: Option<&'static str> = Some("approvals");
    const TEAM_OWNED: bool = true;
    const SHARED_SCOPES: bool = true;
    const MULTI_ORDER: bool = true;

    fn fields(bld: &mut Builder) -> Vec<Field> {
        let mut f = shared_fields::<Approval>(bld, |r| &r.status, PARTS);
        f.push(rf::<Approval>("expiresat", TypeRef::named("Time"), |r| r.expires_at.and_then(time)));
        f.extend(state_and_subscription::<Approval>(PARTS));
        f
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ApprovalRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![
            edges::by_key::<ApprovalRecord, schema::kinds::api_subscription::ApiSubscription>("APISubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::ApiSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
            edges::by_key::<ApprovalRecord, schema::kinds::event_subscription::EventSubscription>("EventSubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::EventSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
            edges::by_key::<ApprovalRecord, schema::kinds::agentic_subscription::AgenticSubscription>("AgenticSubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::AgenticSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
            edges::by_key::<ApprovalRecord, schema::kinds::file_subscription::FileSubscription>("FileSubscription", |s| {
                let sub = &s.record.fields.subscription;
                (sub.kind.kind_id() == schema::KindId::FileSubscription).then(|| sub.key(&s.record.meta.environment))
            }),
        ]
    }

    fn filters() -> Vec<FilterField<ApprovalRecord>> {
        let mut f = shared_filters::<Approval>(|r: &ApprovalRecord| &r.status, PARTS);
        f.push(FilterField::new("expiresat", FilterType::Time, true, |x: &S| FilterValue::Time(x.record.expires_at)));
        f.push(state_filter(PARTS));
        f
    }
}
