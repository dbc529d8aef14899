//! The `SubscriptionInfo` interface: `id: ID!` and
//! `ownerApplication: ApplicationInfo!`, implemented by the reduced subscription types
//! `ApiSubscriptionInfo`, `EventSubscriptionInfo`, `AgenticSubscriptionInfo` and
//! `FileSubscriptionInfo`. `Approval.subscription` / `ApprovalRequest.subscription` resolve through
//! [`resolve`], which returns the concrete type.
//!
//! Also the owner fields every reduced `…Info` type of an owned record shares: `ownerApplication`
//! and the deprecated `ownerApplicationName` / `ownerTeam` ([`owner_fields`]).

use super::info::{application_info, team_info};
use super::reduced::{
    AgenticSubscriptionInfo, ApiSubscriptionInfo, EventSubscriptionInfo, FileSubscriptionInfo, AGENTIC_SUBSCRIPTION_INFO,
    FILE_SUBSCRIPTION_INFO,
};
use super::subscription_common::SubscriptionEntity;
use crate::entity::{global_id, Builder, Entity};
use crate::fields::{enum_item, field, string};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, Interface, InterfaceField, Object, TypeRef};
use async_graphql::Error;
use schema::common::StatusPhase;
use schema::keys::natural;
use schema::kinds::agentic_subscription::AgenticSubscription;
use schema::kinds::api_subscription::ApiSubscription;
use schema::kinds::approval_common::{SubscriptionKind, SubscriptionRef};
use schema::kinds::event_subscription::EventSubscription;
use schema::kinds::file_subscription::FileSubscription;
use schema::Kind;
use std::any::Any;
use storage::Stored;

/// The interface name.
pub const INTERFACE: &str = "SubscriptionInfo";

/// Deprecation reason of `ownerApplicationName` on the `…Info` types.
pub const OWNER_APPLICATION_NAME_DEPRECATION: &str = "Use `ownerApplication.name`.";
/// Deprecation reason of `ownerTeam` on the `…Info` types.
pub const OWNER_TEAM_DEPRECATION: &str = "Use `ownerApplication.ownerTeam`.";

/// Registers the `SubscriptionInfo` interface (once, from `register_all`).
pub fn register(builder: &mut Builder) {
    builder.interfaces.push(
        Interface::new(INTERFACE)
            .field(InterfaceField::new("id", TypeRef::named_nn(TypeRef::ID)))
            .field(InterfaceField::new("ownerApplication", TypeRef::named_nn("ApplicationInfo"))),
    );
}

/// The reduced view of one subscription kind (`ApiSubscriptionInfo`, …): a newtype over the
/// kind's stored record, the parent value of the kind's `…Info` object.
pub trait SubscriptionView: Any + Send + Sync {
    /// The subscription kind.
    type Kind: SubscriptionEntity;
    /// The stored record shown.
    fn stored(&self) -> &Stored<<Self::Kind as Kind>::Record>;
}

/// Registers `<Kind>Info` of the view `V` (implements [`INTERFACE`]), its fields in this order:
/// `id`, the kind's `own` fields, `statusPhase` (enum `<Kind>StatusPhase`) and `statusMessage`,
/// the kind's `after_status` fields, then [`owner_fields`]. A list of these reduced views across
/// teams may hold every subscription of the kind (`graphql.maxRecordsPerRequest` counts it so).
pub fn register_info_object<V: SubscriptionView>(builder: &mut Builder, own: Vec<Field>, after_status: Vec<Field>) {
    let kind = <V::Kind as Entity>::TYPE;
    let info = format!("{kind}Info");
    let phase = format!("{kind}StatusPhase");
    builder.record_list(&info, crate::limits::RecordList::All(<V::Kind as Kind>::ID));
    builder.enumeration_of::<StatusPhase>(&phase);
    let mut o = Object::new(info)
        .implement(INTERFACE)
        .field(field::<V>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<V::Kind>(&p.stored().key)))));
    let fields = own
        .into_iter()
        .chain([
            field::<V>("statusPhase", TypeRef::named(phase), |p, _| Ok(status_of(p).and_then(|s| enum_item(s.phase.as_str())))),
            field::<V>("statusMessage", TypeRef::named(TypeRef::STRING), |p, _| Ok(status_of(p).and_then(|s| string(&s.message)))),
        ])
        .chain(after_status)
        .chain(owner_fields::<V>(|p| {
            let record = &p.stored().record;
            let meta = V::Kind::record_meta(record);
            (&meta.environment, meta.team(), V::Kind::application(record))
        }));
    for f in fields {
        o = o.field(f);
    }
    builder.object(o);
}

/// The status of the subscription a view shows.
fn status_of<V: SubscriptionView>(view: &V) -> Option<&schema::common::Status> {
    <V::Kind as Kind>::status(&view.stored().record)
}

/// The owner application of a reduced view: (environment, team, application name).
pub type OwnerOf<T> = fn(&T) -> (&str, &str, &str);

/// `ownerApplicationName: String!` (deprecated), `ownerTeam: TeamInfo!` (deprecated) and
/// `ownerApplication: ApplicationInfo!` of a reduced type whose parent value is a `T`. Read
/// regardless of the viewer: these are cross-tenant views (ARCHITECTURE.md "Viewers and visibility").
pub fn owner_fields<T: Any + Send + Sync>(owner: OwnerOf<T>) -> Vec<Field> {
    vec![
        field::<T>("ownerApplicationName", TypeRef::named_nn(TypeRef::STRING), move |p, _| Ok(string(owner(p).2)))
            .deprecation(Some(OWNER_APPLICATION_NAME_DEPRECATION)),
        field::<T>("ownerTeam", TypeRef::named_nn("TeamInfo"), move |p, request| {
            let (env, team, _) = owner(p);
            team_info(request, env, team)
        })
        .deprecation(Some(OWNER_TEAM_DEPRECATION)),
        field::<T>("ownerApplication", TypeRef::named_nn("ApplicationInfo"), move |p, request| {
            let (env, team, app) = owner(p);
            application_info(request, &natural::application(env, team, app))
        }),
    ]
}

/// The `SubscriptionInfo` of the subscription `sub` in environment `env` (read regardless of
/// the viewer), typed as its concrete `…Info` object; `None` when the subscription does not
/// exist or its kind is not served yet.
///
/// # Errors
/// Storage failures as `INTERNAL`.
pub fn resolve(request: &RequestContext, env: &str, sub: &SubscriptionRef) -> Result<Option<FieldValue<'static>>, Error> {
    let key = sub.key(env);
    Ok(match sub.kind {
        SubscriptionKind::ApiSubscription => request
            .load_system::<ApiSubscription>(&key)?
            .map(|s| FieldValue::owned_any(ApiSubscriptionInfo(s)).with_type("ApiSubscriptionInfo")),
        SubscriptionKind::EventSubscription => request
            .load_system::<EventSubscription>(&key)?
            .map(|s| FieldValue::owned_any(EventSubscriptionInfo(s)).with_type("EventSubscriptionInfo")),
        SubscriptionKind::FileSubscription => request
            .load_system::<FileSubscription>(&key)?
            .map(|s| FieldValue::owned_any(FileSubscriptionInfo(s)).with_type(FILE_SUBSCRIPTION_INFO)),
        SubscriptionKind::AgenticSubscription => request
            .load_system::<AgenticSubscription>(&key)?
            .map(|s| FieldValue::owned_any(AgenticSubscriptionInfo(s)).with_type(AGENTIC_SUBSCRIPTION_INFO)),
    })
}
