//! The registry: one line per projected kind, in dependency order. Generic code (writer,
//! sources, GraphQL) is instantiated per kind by visiting this list.

use crate::kind::{Features, Kind, KindId};
use crate::kinds;

/// Called once per registered kind by [`visit`].
pub trait KindVisitor {
    /// Visits kind `K`.
    fn visit<K: Kind>(&mut self);
}

/// Visits every registered kind in dependency order (parents before children).
pub fn visit(v: &mut impl KindVisitor) {
    v.visit::<kinds::zone::Zone>();
    v.visit::<kinds::group::Group>();
    v.visit::<kinds::team::Team>();
    v.visit::<kinds::application::Application>();
    v.visit::<kinds::api::Api>();
    v.visit::<kinds::api_exposure::ApiExposure>();
    v.visit::<kinds::api_subscription::ApiSubscription>();
    v.visit::<kinds::event_type::EventType>();
    v.visit::<kinds::event_exposure::EventExposure>();
    v.visit::<kinds::event_subscription::EventSubscription>();
    v.visit::<kinds::permission_set::PermissionSet>();
    v.visit::<kinds::file_exposure::FileExposure>();
    v.visit::<kinds::file_subscription::FileSubscription>();
    v.visit::<kinds::mcp_server::McpServer>();
    v.visit::<kinds::agent_card::AgentCard>();
    v.visit::<kinds::agentic_exposure::AgenticExposure>();
    v.visit::<kinds::agentic_subscription::AgenticSubscription>();
    // Approvals require their subscription (of any family): last.
    v.visit::<kinds::approval::Approval>();
    v.visit::<kinds::approval_request::ApprovalRequest>();
}

/// Whether `kind` is switched on by `features` (ARCHITECTURE.md "Feature flags switch kinds off").
pub fn enabled(kind: KindId, features: &Features) -> bool {
    match kind {
        KindId::EventType | KindId::EventExposure | KindId::EventSubscription => features.pubsub,
        KindId::PermissionSet => features.permission,
        KindId::McpServer | KindId::AgentCard | KindId::AgenticExposure | KindId::AgenticSubscription => features.ai_gateway,
        KindId::FileExposure | KindId::FileSubscription => features.file_manager,
        _ => true,
    }
}

/// The registered kinds, in [`visit`] order.
pub fn registered() -> Vec<KindId> {
    struct Collect(Vec<KindId>);
    impl KindVisitor for Collect {
        fn visit<K: Kind>(&mut self) {
            self.0.push(K::ID);
        }
    }
    let mut c = Collect(Vec::new());
    visit(&mut c);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(kinds.len(), KindId::ALL.len(), "every kind is registered");
    }

    #[test]
    fn feature_flags_switch_kinds_off() {
        let off = Features { pubsub: false, permission: false, ai_gateway: false, file_manager: false };
        assert!(!enabled(KindId::EventSubscription, &off));
        assert!(!enabled(KindId::AgentCard, &off));
        assert!(enabled(KindId::Approval, &off));
        assert!(enabled(KindId::EventSubscription, &Features::default()));
    }
}
