//! `FileExposure` (the entity behind the Go server's file views), its reduced cross-tenant view
//! `FileExposureInfo`, the SFTP value types `FileSFTP` /
//! `SSHPublicKey` it shares with `FileSubscription`, and the edge `Application.fileExposures`.
//! Root query `fileExposures`; visible to the owner application's team. `subscriptions` lists
//! every tenant's subscriptions linked to the exposure as `FileSubscriptionInfo`.

use super::common::{register_with_application_edge, ApplicationEdge};
use super::common::mixin_columns;
use super::reduced::{FileExposureInfo, FileSubscriptionInfo};
use super::subscription_info::owner_fields;
use crate::column::Column;
use crate::entity::{Builder, Entity, global_id, node_value};
use crate::fields::{boolean, enum_item, field, nullable_string, object_value, object_values, record_field, string};
use async_graphql::dynamic::{Field, Object, TypeRef};
use schema::common::Visibility;
use schema::keys::{index, natural};
use schema::kinds::application::Application;
use schema::kinds::file_exposure::FileVariant;
use schema::kinds::file_exposure::{FileExposure, FileExposureRecord, Sftp};
use schema::kinds::file_subscription::FileSubscription;
use schema::kinds::zone::Zone;
use storage::Stored;

/// The parent value of an `SSHPublicKey`: the key text.
struct SshPublicKey(String);

type S = Stored<FileExposureRecord>;

/// Registers the value types and enums of the file kinds (idempotent): `FileSFTP`,
/// `SSHPublicKey`, `FileExposureVisibility`, `FileExposureVariant`.
pub fn register_values(builder: &mut Builder) {
    if !builder.first_time("file_exposure::register_values") {
        return;
    }
    builder.enumeration_of::<Visibility>("FileExposureVisibility");
    builder.enumeration_of::<FileVariant>("FileExposureVariant");
    builder.object(
        Object::new("SSHPublicKey").field(field::<SshPublicKey>("key", TypeRef::named_nn(TypeRef::STRING), |k, _| Ok(string(&k.0)))),
    );
    builder.object(Object::new("FileSFTP").field(field::<Sftp>("publicKeys", TypeRef::named_nn_list_nn("SSHPublicKey"), |p, _| {
        Ok(object_values(p.public_keys.iter().cloned().map(SshPublicKey)))
    })));
}

/// `zone: Zone` of a file record: the zone named by `spec.zone.name` in the record's
/// environment; null when it is not projected.
pub fn zone_field<T: std::any::Any + Send + Sync>(zone: fn(&T) -> (&str, &str)) -> Field {
    field::<T>("zone", TypeRef::named(Zone::TYPE), move |p, request| {
        let (env, name) = zone(p);
        Ok(request.load_visible::<Zone>(&natural::zone(env, name))?.map(node_value::<Zone>))
    })
}

impl Entity for FileExposure {
    const TYPE: &'static str = "FileExposure";
    const ROOT: Option<&'static str> = Some("fileExposures");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        super::values::register(builder);
        register_values(builder);
        register_info(builder);
        vec![
            zone_field::<S>(|p| (&p.record.meta.environment, &p.record.zone)),
            record_field::<FileExposure>("approvalConfig", TypeRef::named_nn("ApprovalConfig"), |r| {
                object_value(r.approval_config.clone())
            }),
            record_field::<FileExposure>("sftp", TypeRef::named("FileSFTP"), |r| r.sftp.clone().and_then(object_value)),
            field::<S>("owner", TypeRef::named_nn(Application::TYPE), |p, request| {
                let r = &p.record;
                let key = natural::application(&r.meta.environment, r.meta.team(), &r.application);
                Ok(request.load_visible::<Application>(&key)?.map(node_value::<Application>))
            }),
            field::<S>("subscriptions", TypeRef::named_nn_list_nn("FileSubscriptionInfo"), |p, request| {
                let subs = request
                    .view
                    .lookup_records::<FileSubscription>(index::FILE_SUBSCRIPTION_BY_TARGET, &p.key)
                    .map_err(crate::error::storage)?;
                Ok(object_values(subs.into_iter().map(FileSubscriptionInfo)))
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<FileExposureRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![
            edges::by_key::<FileExposureRecord, schema::kinds::application::Application>("Owner", |s| {
                Some(natural::application(&s.record.meta.environment, s.record.meta.team(), &s.record.application))
            }),
            edges::by_index::<FileExposureRecord, schema::kinds::file_subscription::FileSubscription>(
                "Subscriptions",
                index::FILE_SUBSCRIPTION_BY_TARGET,
                |s| Some(s.key.clone()),
            ).shown_as_info(),
        ]
    }

    fn columns() -> Vec<Column<FileExposureRecord>> {
        type C = Column<FileExposureRecord>;
        let mut c = mixin_columns::<FileExposure>(|r| &r.meta);
        c.extend([
            C::string("fileType", |r| &r.file_type),
            C::enumeration("variant", "FileExposureVariant", |r| r.variant),
            C::optional_string("serviceExternalURL", |r| r.service_external_url.as_deref()),
            C::enumeration("visibility", "FileExposureVisibility", |r| r.visibility),
            C::boolean("active", |r| r.active).nullable(),
            C::string("zoneName", |r| &r.zone),
            C::optional_string("serviceURL", |r| r.service_url.as_deref()),
        ]);
        c
    }
}

/// Registers `FileExposure` with its root query, and the edge `Application.fileExposures`.
pub fn register(builder: &mut Builder) {
    register_with_application_edge::<FileExposure>(builder, "fileExposures", ApplicationEdge::KeyPrefix);
}

/// Registers `FileExposureInfo`: no SFTP keys, approval settings or subscriber data of the owner.
pub fn register_info(builder: &mut Builder) {
    if !builder.first_time("file_exposure::register_info") {
        return;
    }
    register_values(builder);
    let mut o = Object::new("FileExposureInfo")
        .field(field::<FileExposureInfo>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<FileExposure>(&p.0.key)))))
        .field(field::<FileExposureInfo>("fileType", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.file_type))))
        .field(field::<FileExposureInfo>("visibility", TypeRef::named_nn("FileExposureVisibility"), |p, _| {
            Ok(enum_item(p.0.record.visibility.as_str()))
        }))
        .field(field::<FileExposureInfo>("active", TypeRef::named(TypeRef::BOOLEAN), |p, _| Ok(boolean(p.0.record.active))))
        .field(field::<FileExposureInfo>("serviceUrl", TypeRef::named(TypeRef::STRING), |p, _| {
            Ok(nullable_string(p.0.record.service_url.as_deref()))
        }))
        .field(field::<FileExposureInfo>("serviceExternalUrl", TypeRef::named(TypeRef::STRING), |p, _| {
            Ok(nullable_string(p.0.record.service_external_url.as_deref()))
        }));
    for f in owner_fields::<FileExposureInfo>(|p| (&p.0.record.meta.environment, p.0.record.meta.team(), &p.0.record.application)) {
        o = o.field(f);
    }
    builder.object(o);
}
