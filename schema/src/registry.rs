//! The registry: every projected kind, in dependency order. Generic code (writer,
//! sources, GraphQL) is instantiated per kind by visiting this list.

use crate::kind::{Kind, KindId};
use crate::kinds;

/// Called once per registered kind by [`visit`].
pub trait KindVisitor {
    /// Visits kind `K`.
    fn visit<K: Kind>(&mut self);
}

/// The registry's visit, generated from the rows of the table of kinds.
macro_rules! visit_rows {
    ($( $variant:ident = $code:literal, $module:ident, $label:literal, $plural:literal, $group:literal, $feature:ident, $family:ident, [$($parent:ident),*]; )*) => {
        /// Visits every registered kind in dependency order (parents before children):
        /// [`KindId::REGISTRATION_ORDER`], derived from the table of kinds
        /// ([`crds::kind_table!`]).
        pub fn visit(v: &mut impl KindVisitor) {
            for kind in KindId::REGISTRATION_ORDER {
                match kind { $( KindId::$variant => v.visit::<kinds::$module::$variant>(), )* }
            }
        }
    };
}

crds::kind_table!(visit_rows);

/// The registered kinds, in [`visit`] order: [`KindId::REGISTRATION_ORDER`].
pub fn registered() -> Vec<KindId> {
    KindId::REGISTRATION_ORDER.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::Features;

    #[test]
    fn registry_is_in_dependency_order_without_duplicates() {
        let kinds = registered();
        let mut sorted = kinds.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), kinds.len());
        assert_eq!(kinds.first(), Some(&KindId::Zone));
        let pos = |k: KindId| kinds.iter().position(|x| *x == k).unwrap();
        for sub in [KindId::ApiSubscription, KindId::EventSubscription, KindId::AgenticSubscription, KindId::FileSubscription] {
            assert!(pos(sub) < pos(KindId::Approval) && pos(sub) < pos(KindId::ApprovalRequest), "{sub:?} after approvals");
        }
        let mut visited = Vec::new();
        struct Order<'a>(&'a mut Vec<KindId>);
        impl KindVisitor for Order<'_> {
            fn visit<K: Kind>(&mut self) {
                self.0.push(K::ID);
            }
        }
        visit(&mut Order(&mut visited));
        assert_eq!(visited, kinds, "visit follows the registration order");
        assert_eq!(kinds.len(), KindId::ALL.len(), "every kind is registered");
    }

    #[test]
    fn feature_flags_switch_kinds_off() {
        let off = Features { pubsub: false, permission: false, ai_gateway: false, file_manager: false };
        assert!(!KindId::EventSubscription.enabled(&off));
        assert!(!KindId::AgentCard.enabled(&off));
        assert!(KindId::Approval.enabled(&off));
        assert!(KindId::EventSubscription.enabled(&Features::default()));
    }
}
