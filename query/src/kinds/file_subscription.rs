//! `FileSubscription` (reference-graphql.md §10.3 "File views": the upstream entity), its
//! reduced cross-tenant view `FileSubscriptionInfo` (§10.3; implements `SubscriptionInfo`), and
//! the edge `Application.fileSubscriptions`. Root query `fileSubscriptions`; visible to the owner
//! application's team. `target` is the cross-tenant `FileExposureInfo` of link 0, null without
//! error while unlinked.

use super::common::{meta_filters, status_filters, str_filter};
use super::file_exposure::{register_values, zone_field, FileExposureInfo};
use super::subscription_info::{owner_fields, INTERFACE};
use crate::entity::{
    connection_field, e, field, global_id, nested_rows, node_value, obj, os, register, rf, s, status_fields, time_fields, time_filters,
    Builder, Entity,
};
use crate::error::internal;
use crate::filter::FilterField;
use async_graphql::dynamic::{Field, FieldValue, Object, TypeRef};
use schema::keys::{index, natural};
use schema::kinds::application::{Application, ApplicationRecord};
use schema::kinds::approval::Approval;
use schema::kinds::approval_request::ApprovalRequest;
use schema::kinds::file_exposure::FileExposure;
use schema::kinds::file_subscription::{FileSubscription, FileSubscriptionRecord};
use schema::KindId;
use storage::Stored;

/// The parent value of a `FileSubscriptionInfo`.
pub struct FileSubscriptionInfo(pub Stored<FileSubscriptionRecord>);

/// The GraphQL name of [`FileSubscriptionInfo`].
pub const INFO_TYPE: &str = "FileSubscriptionInfo";

type S = Stored<FileSubscriptionRecord>;

/// The lookup key of this subscription's approvals and approval requests.
fn approval_key(r: &FileSubscriptionRecord) -> schema::Key {
    natural::subscription_ref(KindId::FileSubscription, &r.meta.environment, &r.meta.namespace, &r.meta.name)
}

impl Entity for FileSubscription {
    const TYPE: &'static str = "FileSubscription";
    const ROOT: Option<&'static str> = Some("fileSubscriptions");
    const TEAM_OWNED: bool = true;

    fn fields(bld: &mut Builder) -> Vec<Field> {
        register_values(bld);
        register_info(bld);
        super::file_exposure::register_info(bld);
        let mut f = time_fields::<FileSubscription>();
        f.extend(status_fields::<FileSubscription>(bld, |r| &r.status));
        f.extend([
            rf::<FileSubscription>("environment", TypeRef::named(TypeRef::STRING), |r| s(&r.meta.environment)),
            rf::<FileSubscription>("namespace", TypeRef::named_nn(TypeRef::STRING), |r| s(&r.meta.namespace)),
            rf::<FileSubscription>("name", TypeRef::named_nn(TypeRef::STRING), |r| s(&r.meta.name)),
            rf::<FileSubscription>("fileType", TypeRef::named_nn(TypeRef::STRING), |r| s(&r.file_type)),
            rf::<FileSubscription>("zoneName", TypeRef::named_nn(TypeRef::STRING), |r| s(&r.zone)),
            zone_field::<S>(|p| (&p.record.meta.environment, &p.record.zone)),
            rf::<FileSubscription>("sftp", TypeRef::named("FileSFTP"), |r| r.sftp.clone().and_then(obj)),
            rf::<FileSubscription>("serviceURL", TypeRef::named(TypeRef::STRING), |r| os(r.service_url.as_deref())),
            rf::<FileSubscription>("serviceExternalURL", TypeRef::named(TypeRef::STRING), |r| os(r.service_external_url.as_deref())),
            field::<S>("owner", TypeRef::named_nn(Application::TYPE), |p, rq| {
                let r = &p.record;
                let key = natural::application(&r.meta.environment, r.meta.team(), &r.application);
                Ok(rq.load_visible::<Application>(&key)?.map(node_value::<Application>))
            }),
            field::<S>("approval", TypeRef::named(Approval::TYPE), |p, rq| {
                let found =
                    rq.view.lookup_records::<Approval>(index::APPROVAL_BY_SUBSCRIPTION, &approval_key(&p.record)).map_err(internal)?;
                Ok(found.into_iter().find(|a| rq.visible::<Approval>(a)).map(node_value::<Approval>))
            }),
            field::<S>("approvalRequests", TypeRef::named_nn_list(ApprovalRequest::TYPE), |p, rq| {
                let found = rq
                    .view
                    .lookup_records::<ApprovalRequest>(index::APPROVAL_REQUEST_BY_SUBSCRIPTION, &approval_key(&p.record))
                    .map_err(internal)?;
                Ok(Some(FieldValue::list(
                    found.into_iter().filter(|a| rq.visible::<ApprovalRequest>(a)).map(node_value::<ApprovalRequest>),
                )))
            }),
            field::<S>("target", TypeRef::named("FileExposureInfo"), |p, rq| match p.links.first() {
                Some(Some(key)) => Ok(rq.load_system::<FileExposure>(key)?.and_then(|x| obj(FileExposureInfo(x)))),
                _ => Ok(None),
            }),
        ]);
        f
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<FileSubscriptionRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![
            edges::by_key::<FileSubscriptionRecord, schema::kinds::application::Application>("Owner", |s| {
                Some(natural::application(&s.record.meta.environment, s.record.meta.team(), &s.record.application))
            }),
            edges::by_key::<FileSubscriptionRecord, schema::kinds::file_exposure::FileExposure>("Target", |s| {
                s.links.first().cloned().flatten()
            }),
            edges::by_index::<FileSubscriptionRecord, schema::kinds::approval::Approval>(
                "Approval",
                index::APPROVAL_BY_SUBSCRIPTION,
                |s| {
                    Some(natural::subscription_ref(
                        schema::KindId::FileSubscription,
                        &s.record.meta.environment,
                        &s.record.meta.namespace,
                        &s.record.meta.name,
                    ))
                },
            ),
            edges::by_index::<FileSubscriptionRecord, schema::kinds::approval_request::ApprovalRequest>(
                "ApprovalRequests",
                index::APPROVAL_REQUEST_BY_SUBSCRIPTION,
                |s| {
                    Some(natural::subscription_ref(
                        schema::KindId::FileSubscription,
                        &s.record.meta.environment,
                        &s.record.meta.namespace,
                        &s.record.meta.name,
                    ))
                },
            ),
        ]
    }

    fn filters() -> Vec<FilterField<FileSubscriptionRecord>> {
        let mut f = time_filters();
        f.extend(status_filters("FileSubscriptionStatusPhase", |r: &FileSubscriptionRecord| &r.status));
        f.extend(meta_filters(|r: &FileSubscriptionRecord| &r.meta));
        f.extend([
            str_filter::<FileSubscriptionRecord>("name", false, |r| Some(r.meta.name.as_str())),
            str_filter::<FileSubscriptionRecord>("fileType", false, |r| Some(r.file_type.as_str())),
            str_filter::<FileSubscriptionRecord>("zoneName", false, |r| Some(r.zone.as_str())),
            str_filter::<FileSubscriptionRecord>("serviceURL", true, |r| r.service_url.as_deref()),
            str_filter::<FileSubscriptionRecord>("serviceExternalURL", true, |r| r.service_external_url.as_deref()),
        ]);
        f
    }
}

/// Registers `FileSubscription` with its root query, and the edge `Application.fileSubscriptions`.
pub fn register_all(bld: &mut Builder) {
    register::<FileSubscription>(bld);
    let w = bld.where_type::<FileSubscription>();
    bld.extend(
        Application::TYPE,
        vec![connection_field::<FileSubscription, Stored<ApplicationRecord>>("fileSubscriptions", w, |rq, app, order, pred| {
            let candidates = rq.view.lookup_records::<FileSubscription>(index::FILE_SUBSCRIPTION_BY_OWNER, &app.key).map_err(internal)?;
            Ok(Box::new(nested_rows::<FileSubscription>(rq, candidates, order, &pred)))
        })],
    );
}

/// Registers `FileSubscriptionInfo` (implements `SubscriptionInfo`): no SFTP keys of the
/// subscriber.
pub fn register_info(bld: &mut Builder) {
    bld.enumeration("FileSubscriptionStatusPhase", &["READY", "PENDING", "ERROR", "UNKNOWN"]);
    let mut o = Object::new(INFO_TYPE)
        .implement(INTERFACE)
        .field(field::<FileSubscriptionInfo>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(s(&global_id::<FileSubscription>(&p.0.key)))))
        .field(field::<FileSubscriptionInfo>("fileType", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(s(&p.0.record.file_type))))
        .field(field::<FileSubscriptionInfo>("statusPhase", TypeRef::named("FileSubscriptionStatusPhase"), |p, _| {
            Ok(e(p.0.record.status.phase.as_str()))
        }))
        .field(field::<FileSubscriptionInfo>("statusMessage", TypeRef::named(TypeRef::STRING), |p, _| Ok(s(&p.0.record.status.message))))
        .field(field::<FileSubscriptionInfo>("serviceUrl", TypeRef::named(TypeRef::STRING), |p, _| {
            Ok(os(p.0.record.service_url.as_deref()))
        }))
        .field(field::<FileSubscriptionInfo>("serviceExternalUrl", TypeRef::named(TypeRef::STRING), |p, _| {
            Ok(os(p.0.record.service_external_url.as_deref()))
        }));
    for f in owner_fields::<FileSubscriptionInfo>(|p| (&p.0.record.meta.environment, p.0.record.meta.team(), &p.0.record.application)) {
        o = o.field(f);
    }
    bld.object(o);
}
