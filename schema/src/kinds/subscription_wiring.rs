//! How every exposure and subscription family (API, event, agentic, file) is keyed, linked,
//! isolated and indexed — one definition, parameterised by the family's index names (ARCHITECTURE.md
//! "Environments in one store" and "References by natural key"). Subscriptions
//! ([`SubscriptionWiring`]):
//!
//! - key `(environment, namespace, name)`; requires the owner Application `(env, team, app)`
//!   (team from the namespace);
//! - link 0 = the *active* exposure of the same environment and key (base path, event type,
//!   file type), resolved by the writer; unlinked subscriptions are stored and retried;
//! - visible to the owner team; indexed by key, by owner, and by target while linked;
//! - its approvals and approval requests re-resolve their provider team when the target changes.
//!
//! Exposures: [`ExposureWiring`].

use crate::common::Meta;
use crate::keys::{index, natural, Key};
use crate::kind::{IndexName, KindId, Link, Parent, Scope};

/// The index names of one subscription family.
pub struct SubscriptionWiring {
    /// The subscription kind (for `natural::subscription_ref`).
    pub kind: KindId,
    /// The exposure family's index of active exposures by `(env, key)`.
    pub target_active: IndexName,
    /// Subscriptions by `(env, key)`.
    pub by_key: IndexName,
    /// Subscriptions by owner application key.
    pub by_owner: IndexName,
    /// Subscriptions by linked target key.
    pub by_target: IndexName,
}

impl SubscriptionWiring {
    /// `(environment, namespace, name)`.
    pub fn key(&self, meta: &Meta) -> Key {
        natural::namespaced(&meta.environment, &meta.namespace, &meta.name)
    }

    /// The owner application must exist.
    pub fn requires(&self, meta: &Meta, app: &str) -> Vec<Parent> {
        vec![Parent { kind: KindId::Application, key: natural::application(&meta.environment, meta.team(), app) }]
    }

    /// Link 0: the active exposure of the environment and `key_value`.
    pub fn links(&self, meta: &Meta, key_value: &str) -> Vec<Link> {
        vec![Link::First { index: self.target_active, key: natural::in_env(&meta.environment, key_value) }]
    }

    /// Visible to the owner team of its environment.
    pub fn scopes(&self, meta: &Meta) -> Vec<Scope> {
        vec![Scope::Team { env: meta.environment.clone(), team: meta.team().to_string() }]
    }

    /// By key, by owner, and by target while linked.
    pub fn index_entries(&self, meta: &Meta, app: &str, key_value: &str, links: &[Option<Key>]) -> Vec<(IndexName, Key)> {
        let env = &meta.environment;
        let mut entries =
            vec![(self.by_key, natural::in_env(env, key_value)), (self.by_owner, natural::application(env, meta.team(), app))];
        if let Some(Some(target)) = links.first() {
            entries.push((self.by_target, target.clone()));
        }
        entries
    }

    /// The approvals and approval requests of this subscription.
    pub fn dependents(&self, meta: &Meta) -> Vec<(IndexName, Key)> {
        let r = natural::subscription_ref(self.kind, &meta.environment, &meta.namespace, &meta.name);
        vec![(index::APPROVAL_BY_SUBSCRIPTION, r.clone()), (index::APPROVAL_REQUEST_BY_SUBSCRIPTION, r)]
    }
}

/// How every exposure family is keyed, isolated and indexed: key
/// `(environment, team, application, key value)` (built by the family's `natural::*_exposure`),
/// requires the owner Application, visible to the owner team, listed in the family's
/// active-exposure index only while `status.active`, and the subscriptions of the same key
/// re-resolve their target whenever an exposure of it is written or deleted.
pub struct ExposureWiring {
    /// Active exposures by `(env, key)`.
    pub active: IndexName,
    /// The subscription family's index by `(env, key)`.
    pub subscriptions_by_key: IndexName,
}

impl ExposureWiring {
    /// The owner application must exist.
    pub fn requires(&self, meta: &Meta, app: &str) -> Vec<Parent> {
        vec![Parent { kind: KindId::Application, key: natural::application(&meta.environment, meta.team(), app) }]
    }

    /// Visible to the owner team of its environment.
    pub fn scopes(&self, meta: &Meta) -> Vec<Scope> {
        vec![Scope::Team { env: meta.environment.clone(), team: meta.team().to_string() }]
    }

    /// The active-exposure entry, only while active.
    pub fn index_entries(&self, meta: &Meta, key_value: &str, active: bool) -> Vec<(IndexName, Key)> {
        if active {
            vec![(self.active, natural::in_env(&meta.environment, key_value))]
        } else {
            Vec::new()
        }
    }

    /// The subscriptions of the same key.
    pub fn dependents(&self, meta: &Meta, key_value: &str) -> Vec<(IndexName, Key)> {
        vec![(self.subscriptions_by_key, natural::in_env(&meta.environment, key_value))]
    }
}

/// The [`crate::kind::Kind`] impl of a subscription kind: keyed, linked, isolated and indexed by
/// its family's [`SubscriptionWiring`]; the kind says only its record, `VERSION`, wiring, the
/// record field naming its target (base path, event type, file type) and its translation
/// (`fn(&crds::$kind, &Context) -> Result<$record, Skip>`).
///
/// Link 0 is the target, the active exposure of the environment and that field; approvals and
/// approval requests of a subscription re-resolve the target exposure (and so their
/// provider-team scope) when it changes (`dependents`).
macro_rules! subscription_kind {
    (
        $kind:ident, $record:ident {
            const VERSION: u32 = $version:literal;
            wiring: $wiring:path,
            target: $target:ident,
            translate: $translate:path $(,)?
        }
    ) => {
        impl $crate::kind::Kind for $kind {
            $crate::kind::family_kind_items!($kind, $record, $version, $translate);
            const RETRY_UNLINKED: bool = true;

            fn key(rec: &$record) -> $crate::keys::Key {
                $wiring.key(&rec.meta)
            }

            fn requires(rec: &$record) -> Vec<$crate::kind::Parent> {
                $wiring.requires(&rec.meta, &rec.application)
            }

            fn links(rec: &$record) -> Vec<$crate::kind::Link> {
                $wiring.links(&rec.meta, &rec.$target)
            }

            fn scopes(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<$crate::kind::Scope> {
                $wiring.scopes(&rec.meta)
            }

            fn index_entries(rec: &$record, links: &[Option<$crate::keys::Key>]) -> Vec<($crate::kind::IndexName, $crate::keys::Key)> {
                $wiring.index_entries(&rec.meta, &rec.application, &rec.$target, links)
            }

            fn dependents(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<($crate::kind::IndexName, $crate::keys::Key)> {
                $wiring.dependents(&rec.meta)
            }
        }
    };
}

pub(crate) use subscription_kind;

/// The [`crate::kind::Kind`] impl of an exposure kind: keyed by its family's natural-key
/// function `(environment, team, application, key value)`, required, isolated and indexed by
/// its family's [`ExposureWiring`]; the kind says only its record, `VERSION`, wiring, natural
/// key, the record field holding its key value (base path, event type, file type) and its
/// translation (`fn(&crds::$kind, &Context) -> Result<$record, Skip>`).
///
/// Listed in the family's active-exposure index only while `active`; the subscriptions of its
/// key value re-resolve their target whenever it is written or deleted (`dependents`).
macro_rules! exposure_kind {
    (
        $kind:ident, $record:ident {
            const VERSION: u32 = $version:literal;
            wiring: $wiring:path,
            natural_key: $natural:path,
            target: $target:ident,
            translate: $translate:path $(,)?
        }
    ) => {
        impl $crate::kind::Kind for $kind {
            $crate::kind::family_kind_items!($kind, $record, $version, $translate);

            fn key(rec: &$record) -> $crate::keys::Key {
                $natural(&rec.meta.environment, rec.meta.team(), &rec.application, &rec.$target)
            }

            fn requires(rec: &$record) -> Vec<$crate::kind::Parent> {
                $wiring.requires(&rec.meta, &rec.application)
            }

            fn scopes(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<$crate::kind::Scope> {
                $wiring.scopes(&rec.meta)
            }

            fn index_entries(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<($crate::kind::IndexName, $crate::keys::Key)> {
                $wiring.index_entries(&rec.meta, &rec.$target, rec.active)
            }

            fn dependents(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<($crate::kind::IndexName, $crate::keys::Key)> {
                $wiring.dependents(&rec.meta, &rec.$target)
            }
        }
    };
}

pub(crate) use exposure_kind;
