//! Answers shared by identical subscriptions: each event is resolved once for every
//! subscription of the same operation and viewer, the others take a copy of its answer.
//!
//! Subscriptions are **grouped** by everything an answer depends on besides the event: the
//! operation's text, its name, its variables and the viewer's claims (kind, access,
//! environment, group, `clientId`; not `exp`). A group viewer's teams are compared per answer,
//! since they are resolved again while subscriptions run. Each subscription still follows the
//! change log on its own (its start, `after`, `GONE` and pace are its own); only the resolution
//! of one log entry is shared: the first member that reaches it resolves it and keeps the
//! answer (or that `where` left it out), the members after it take that. An answer with an
//! error is never kept, so each member meets its own.
//!
//! **Bounds.** A group keeps the answers of its [`GROUP_ANSWERS`] newest entries, and all
//! groups together at most [`MAX_BYTES`] (estimated from the bytes each answer charged to its
//! budget, [`crate::deadline::Deadline::charge`]); past either bound a member resolves on its
//! own, as without sharing. A subscription alone in its group keeps nothing. A group lives as
//! long as one of its members.

use super::Position;
use crate::viewer::Viewer;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Answers one group keeps (its newest entries): a change-log read of one subscription.
pub const GROUP_ANSWERS: usize = super::READ_BATCH;

/// Bytes all groups' answers may take together (each counted as its charged size plus
/// [`ANSWER_OVERHEAD`]).
pub const MAX_BYTES: usize = 32 << 20;

/// What one kept answer is counted as beyond its charged bytes.
const ANSWER_OVERHEAD: usize = 128;

/// What a subscription's answers depend on besides the event (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    /// SHA-256 of the operation's text, its name and its variables (as JSON), each preceded
    /// by its length: a key of fixed size, however long the text.
    pub operation: [u8; 32],
    /// The viewer without `exp` and without a group viewer's teams, compared as it is.
    pub viewer: Viewer,
}

impl GroupKey {
    /// The key of `request`'s subscriptions for `viewer`.
    pub fn new(request: &async_graphql::Request, viewer: &Viewer) -> GroupKey {
        let mut viewer = viewer.clone();
        viewer.expires_at = None;
        if viewer.kind == crate::viewer::ViewerKind::Group {
            viewer.teams.clear();
        }
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        let variables = serde_json::to_string(&request.variables).unwrap_or_default();
        for part in [Some(request.query.as_str()), request.operation_name.as_deref(), Some(variables.as_str())] {
            let part = part.map_or(&[0xff][..], str::as_bytes);
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        GroupKey { operation: hash.finalize().into(), viewer }
    }
}

/// Every group of one change log.
#[derive(Default)]
pub(crate) struct Groups {
    groups: Mutex<HashMap<GroupKey, Weak<Group>>>,
    /// Bytes kept by all groups.
    bytes: AtomicUsize,
    /// Answers taken from another member so far.
    hits: AtomicU64,
}

/// What sharing does now ([`super::ChangeLog::sharing`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sharing {
    /// Groups with a running subscription (a subscription alone is a group of one).
    pub groups: usize,
    /// Bytes the kept answers take (at most [`MAX_BYTES`]).
    pub bytes: usize,
    /// Events answered with another member's answer since the start.
    pub answers_shared: u64,
}

impl Groups {
    /// The group of `key`, joined (or started).
    pub fn join(self: &Arc<Groups>, key: GroupKey) -> Arc<Group> {
        let mut groups = lock(&self.groups);
        if let Some(group) = groups.get(&key).and_then(Weak::upgrade) {
            return group;
        }
        let group = Arc::new(Group { key: key.clone(), owner: self.clone(), kept: Mutex::default() });
        groups.insert(key, Arc::downgrade(&group));
        group
    }

    /// What sharing does now.
    pub fn sharing(&self) -> Sharing {
        Sharing {
            groups: lock(&self.groups).values().filter(|g| g.strong_count() > 0).count(),
            bytes: self.bytes.load(Ordering::Relaxed),
            answers_shared: self.hits.load(Ordering::Relaxed),
        }
    }
}

/// How one log entry turned out for a group.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Answer {
    /// The event's data.
    Sent(async_graphql::Value),
    /// `where` left the record out.
    Skipped,
}

struct Kept {
    position: Position,
    /// A group viewer's teams when it was resolved.
    teams: Vec<String>,
    answer: Answer,
    bytes: usize,
}

/// The subscriptions of one [`GroupKey`] (held by each member's subscription data).
pub(crate) struct Group {
    key: GroupKey,
    owner: Arc<Groups>,
    kept: Mutex<VecDeque<Kept>>,
}

impl Group {
    /// Whether another subscription is in the group (else nothing is kept or looked up).
    pub fn shared(self: &Arc<Group>) -> bool {
        Arc::strong_count(self) > 1
    }

    /// The answer kept for the entry at `position` resolved for `teams`.
    pub fn find(&self, position: Position, teams: &[String]) -> Option<Answer> {
        let kept = lock(&self.kept);
        let i = kept.partition_point(|k| k.position < position);
        let found = kept.get(i).filter(|k| k.position == position && k.teams == teams).map(|k| k.answer.clone());
        if found.is_some() {
            self.owner.hits.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Keeps the answer of the entry at `position` for `teams`, `charged` bytes: not when the
    /// group keeps a newer one already or the bytes of all groups would pass [`MAX_BYTES`].
    pub fn keep(&self, position: Position, teams: &[String], answer: Answer, charged: usize) {
        let bytes = charged.saturating_add(ANSWER_OVERHEAD);
        let mut kept = lock(&self.kept);
        if kept.back().is_some_and(|k| k.position >= position) {
            return;
        }
        if kept.len() >= GROUP_ANSWERS {
            if let Some(old) = kept.pop_front() {
                self.owner.bytes.fetch_sub(old.bytes, Ordering::Relaxed);
            }
        }
        let total = self.owner.bytes.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes);
        if total > MAX_BYTES {
            self.owner.bytes.fetch_sub(bytes, Ordering::Relaxed);
            return;
        }
        kept.push_back(Kept { position, teams: teams.to_vec(), answer, bytes });
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let bytes: usize = lock(&self.kept).iter().map(|k| k.bytes).sum();
        self.owner.bytes.fetch_sub(bytes, Ordering::Relaxed);
        let mut groups = lock(&self.owner.groups);
        // Only this group's own entry, not one that replaced it since.
        if groups.get(&self.key).is_some_and(|g| g.strong_count() == 0) {
            groups.remove(&self.key);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update leaves the value consistent: recover from a panic elsewhere.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(query: &str, client: &str) -> GroupKey {
        let claims = serde_json::json!({"clientId": client, "scope": "tardis:group:read", "env": "poc", "exp": 1});
        let viewer = Viewer::from_claims(&claims, "tardis").unwrap();
        GroupKey::new(&async_graphql::Request::new(query), &viewer)
    }

    fn at(revision: u64) -> Position {
        Position { revision, index: 0 }
    }

    #[test]
    fn identical_subscriptions_share_and_others_do_not() {
        let groups = Arc::new(Groups::default());
        let a = groups.join(key("subscription { changes { id } }", "g--t--app"));
        assert!(!a.shared(), "alone in its group");
        let b = groups.join(key("subscription { changes { id } }", "g--t--app"));
        let other_client = groups.join(key("subscription { changes { id } }", "g--t--other"));
        let other_text = groups.join(key("subscription { changes { id position } }", "g--t--app"));
        assert!(Arc::ptr_eq(&a, &b) && a.shared());
        assert!(!Arc::ptr_eq(&a, &other_client) && !Arc::ptr_eq(&a, &other_text));
        let mut with_variables = key("subscription { changes { id } }", "g--t--app");
        let request = async_graphql::Request::new("subscription { changes { id } }")
            .variables(async_graphql::Variables::from_json(serde_json::json!({"after": "x"})));
        with_variables.operation = GroupKey::new(&request, &with_variables.viewer).operation;
        assert_ne!(with_variables, key("subscription { changes { id } }", "g--t--app"), "other variables");
        let expiring = key("subscription { changes { id } }", "g--t--app");
        assert_eq!(expiring.viewer.expires_at, None, "`exp` does not split groups");
        assert_eq!(groups.sharing().groups, 3);
        let teams = vec!["g--t".to_string()];
        a.keep(at(5), &teams, Answer::Sent(async_graphql::Value::from(1)), 10);
        assert_eq!(b.find(at(5), &teams), Some(Answer::Sent(async_graphql::Value::from(1))));
        assert_eq!(groups.sharing().answers_shared, 1);
        assert_eq!(b.find(at(5), &["g--u".to_string()]), None, "resolved for other teams");
        assert_eq!(b.find(at(6), &teams), None);
        a.keep(at(4), &teams, Answer::Skipped, 0);
        assert_eq!(b.find(at(4), &teams), None, "an older entry is not kept after a newer one");
        assert_eq!(groups.sharing().bytes, 10 + ANSWER_OVERHEAD);
        drop((a, b));
        assert_eq!(groups.sharing().bytes, 0, "a group's bytes go with it");
        assert_eq!(groups.sharing().groups, 2);
        assert_eq!(lock(&groups.groups).len(), 2, "its registration too");
    }

    #[test]
    fn a_group_keeps_its_newest_answers_and_all_stay_under_the_byte_bound() {
        let groups = Arc::new(Groups::default());
        let a = groups.join(key("subscription { changes { id } }", "g--t--app"));
        for r in 0..(GROUP_ANSWERS as u64 + 10) {
            a.keep(at(r), &[], Answer::Skipped, 0);
        }
        assert_eq!(a.find(at(9), &[]), None, "the oldest went");
        assert_eq!(a.find(at(10), &[]), Some(Answer::Skipped));
        assert_eq!(groups.sharing().bytes, GROUP_ANSWERS * ANSWER_OVERHEAD);
        let b = groups.join(key("subscription { changes { node { id } } }", "g--t--app"));
        b.keep(at(1), &[], Answer::Skipped, MAX_BYTES);
        assert_eq!(b.find(at(1), &[]), None, "past the bound of all groups");
        assert_eq!(groups.sharing().bytes, GROUP_ANSWERS * ANSWER_OVERHEAD);
    }
}
