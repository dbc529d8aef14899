//! `FileSubscription` (the entity behind the Go server's file views), its reduced cross-tenant
//! view `FileSubscriptionInfo` (implements `SubscriptionInfo`), and
//! the edge `Application.fileSubscriptions`. Root query `fileSubscriptions`; visible to the owner
//! application's team. `target` is the cross-tenant `FileExposureInfo` of link 0, null without
//! error while unlinked.

use super::common::mixin_columns;
use super::file_exposure::{register_values, zone_field};
use super::reduced::{FileExposureInfo, FileSubscriptionInfo};
use super::subscription_info::{register_info_object, SubscriptionView};
use crate::column::Column;
use crate::entity::{Builder, Entity};
use crate::fields::{field, nullable_string, object_value, record_field, string};
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use schema::keys::index;
use schema::kinds::file_exposure::FileExposure;
use schema::kinds::file_subscription::{FileSubscription, FileSubscriptionRecord};
use storage::Stored;

type S = Stored<FileSubscriptionRecord>;

impl Entity for FileSubscription {
    const TYPE: &'static str = "FileSubscription";
    const ROOT: Option<&'static str> = Some("fileSubscriptions");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        register_values(builder);
        register_info(builder);
        super::file_exposure::register_info(builder);
        let mut f = vec![
            zone_field::<S>(|p| (&p.record.meta.environment, &p.record.zone)),
            record_field::<FileSubscription>("sftp", TypeRef::named("FileSFTP"), |r| r.sftp.clone().and_then(object_value)),
        ];
        f.extend(super::subscription_common::link_fields::<FileSubscription>());
        f
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<FileSubscriptionRecord>> {
        super::subscription_common::link_edges::<FileSubscription>()
    }

    fn columns() -> Vec<Column<FileSubscriptionRecord>> {
        type C = Column<FileSubscriptionRecord>;
        let mut c = mixin_columns::<FileSubscription>(|r| &r.meta);
        c.extend([
            C::string("name", |r| &r.meta.name),
            C::string("fileType", |r| &r.file_type),
            C::string("zoneName", |r| &r.zone),
            C::optional_string("serviceURL", |r| r.service_url.as_deref()),
            C::optional_string("serviceExternalURL", |r| r.service_external_url.as_deref()),
        ]);
        c
    }
}

/// Registers `FileSubscription` with its root query, and the edge `Application.fileSubscriptions`.
pub fn register(builder: &mut Builder) {
    super::common::register_with_application_edge::<FileSubscription>(builder, "fileSubscriptions", super::common::ApplicationEdge::Index(index::FILE_SUBSCRIPTION_BY_OWNER));
}

/// Registers `FileSubscriptionInfo` (implements `SubscriptionInfo`): no SFTP keys of the
/// subscriber.
pub fn register_info(builder: &mut Builder) {
    register_info_object::<FileSubscriptionInfo>(
        builder,
        vec![field::<FileSubscriptionInfo>("fileType", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.file_type)))],
        vec![
            field::<FileSubscriptionInfo>("serviceUrl", TypeRef::named(TypeRef::STRING), |p, _| {
                Ok(nullable_string(p.0.record.service_url.as_deref()))
            }),
            field::<FileSubscriptionInfo>("serviceExternalUrl", TypeRef::named(TypeRef::STRING), |p, _| {
                Ok(nullable_string(p.0.record.service_external_url.as_deref()))
            }),
        ],
    );
}

impl SubscriptionView for FileSubscriptionInfo {
    type Kind = FileSubscription;

    fn stored(&self) -> &Stored<FileSubscriptionRecord> {
        &self.0
    }
}

impl super::subscription_common::SubscriptionEntity for FileSubscription {
    type Exposure = FileExposure;
    const TARGET_INFO: &'static str = "FileExposureInfo";

    fn record_meta(r: &FileSubscriptionRecord) -> &schema::common::Meta {
        &r.meta
    }

    fn application(r: &FileSubscriptionRecord) -> &str {
        &r.application
    }

    fn target_info(x: Stored<<FileExposure as schema::Kind>::Record>) -> FieldValue<'static> {
        FieldValue::owned_any(FileExposureInfo(x))
    }
}
