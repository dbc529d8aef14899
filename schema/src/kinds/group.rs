//! Group. Natural key `(environment, name)`; visible to every
//! viewer of its environment. Zone and Group store no status (their tables have none).

use crate::common::Meta;
use crate::keys::Key;
use crate::kind::{Context, Kind, KindId, Scope, Skip};
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The Group kind.
pub struct Group;

/// A projected Group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// Common metadata; `meta.name` is the group name (`metadata.name`).
    pub meta: Meta,
    /// `spec.displayName`; must be non-empty.
    pub display_name: String,
    /// `spec.description`; `""` when absent.
    pub description: String,
}

impl Kind for Group {
    const ID: KindId = KindId::Group;
    const VERSION: u32 = 1;
    type Cr = crds::Group;
    type Record = GroupRecord;

    fn meta(cr: &crds::Group) -> &ObjectMeta {
        &cr.metadata
    }

    fn translate(cr: &crds::Group, _ctx: &Context) -> Result<GroupRecord, Skip> {
        let meta = Meta::from_object(&cr.metadata)?;
        let display_name = crate::common::required("spec.displayName", &cr.spec.display_name)?.to_string();
        Ok(GroupRecord { meta, display_name, description: cr.spec.description.clone().unwrap_or_default() })
    }

    fn key(rec: &GroupRecord) -> Key {
        crate::keys::natural::group(&rec.meta.environment, &rec.meta.name)
    }

    fn scopes(rec: &GroupRecord, _links: &[Option<Key>]) -> Vec<Scope> {
        vec![Scope::Env { env: rec.meta.environment.clone() }]
    }

    fn created_at(rec: &GroupRecord) -> Option<Timestamp> {
        rec.meta.creation_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testing::{ctx, world_object};

    #[test]
    fn empty_display_name_is_skipped() {
        let mut cr: crds::Group = world_object("Group", "poc", "payments");
        cr.spec.display_name.clear();
        assert_eq!(Group::translate(&cr, &ctx()), Err(Skip::Missing("spec.displayName")));
    }
}
