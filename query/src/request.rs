//! The request context: what every resolver of one request (or one subscription event) reads —
//! one consistent read view, the viewer, the clock, the search index, the limits and the
//! deadline.

use crate::viewer::Viewer;
use async_graphql::Error;
use schema::{Key, Kind, Timestamp};
use std::sync::Arc;
use storage::{ReadView, Stored};

/// Per-request data: one consistent read view, the viewer, the clock. Cheap to clone (an
/// export runs each of its pages on a clone, [`crate::export`]).
#[derive(Clone)]
pub struct RequestContext {
    /// The read transaction every resolver of this request uses (shared by an export's pages).
    pub view: Arc<ReadView>,
    /// The caller (group teams resolved).
    pub viewer: Viewer,
    /// The time used for time-dependent fields (secret rotation phase).
    pub now: Timestamp,
    /// Maximum page size.
    pub max_page_size: usize,
    /// The catalogue search index (`search` arguments, `catalogueSearch`); `None` when the
    /// store has none open (those fields then fail with `INTERNAL`).
    pub catalogue: Option<storage::search::Catalogue>,
    /// The request's limits (search texts are checked again where they are used).
    pub limits: Arc<crate::limits::Limits>,
    /// When the request must stop; long loops ask it.
    pub deadline: crate::deadline::Deadline,
    /// Whether the store keeps history (`history.enabled`; `history`, `activity`).
    pub history_enabled: bool,
}

impl RequestContext {
    /// The context every resolver of one request (or one subscription event) reads: `view` and
    /// `viewer` (group teams resolved), the clock (`now`, else the wall clock), the store's search
    /// index, and `deadline`, which gets the response budget (drawing on `pool` beyond
    /// [`crate::deadline::FREE_BYTES`]) and stops the view's long reads.
    pub(crate) fn new(
        store: &storage::Store,
        view: storage::ReadView,
        viewer: Viewer,
        deadline: crate::deadline::Deadline,
        now: Option<Timestamp>,
        limits: &Arc<crate::limits::Limits>,
        pool: &Arc<crate::deadline::MemoryPool>,
    ) -> RequestContext {
        deadline.limit_response(limits.max_response_bytes, Some(pool.clone()));
        RequestContext::unlimited(store, view, viewer, deadline, now, limits)
    }

    /// As [`RequestContext::new`], without the answer budget (`graphql.maxResponseBytes`): an
    /// export streams its answer in pages ([`crate::export`]).
    pub(crate) fn unlimited(
        store: &storage::Store,
        view: storage::ReadView,
        viewer: Viewer,
        deadline: crate::deadline::Deadline,
        now: Option<Timestamp>,
        limits: &Arc<crate::limits::Limits>,
    ) -> RequestContext {
        let stop = deadline.clone();
        view.interrupt_when(move || stop.passed());
        view.refuse_while_rederiving(store.unavailable());
        RequestContext {
            view: Arc::new(view),
            viewer,
            now: now.unwrap_or_else(|| Timestamp::from_datetime(chrono::Utc::now())),
            max_page_size: limits.max_page_size,
            catalogue: store.catalogue(),
            limits: limits.clone(),
            deadline,
            history_enabled: store.history_settings().enabled,
        }
    }

    /// Whether the viewer may see the record of kind `K`.
    pub fn visible<K: Kind>(&self, s: &Stored<K::Record>) -> bool {
        self.viewer.can_see(&K::scopes(&s.record, &s.links))
    }

    /// A storage failure as a GraphQL error: the deadline's error when the read was stopped
    /// for it, else `INTERNAL`.
    pub fn storage_error(&self, e: storage::StorageError) -> Error {
        match e {
            storage::StorageError::Interrupted => self.deadline.error(),
            e => crate::error::storage(e),
        }
    }

    /// Loads a record of kind `K` if the viewer may see it.
    ///
    /// # Errors
    /// Storage failures as `INTERNAL`.
    pub fn load_visible<K: Kind>(&self, key: &Key) -> Result<Option<Stored<K::Record>>, Error> {
        Ok(self.view.get::<K>(key).map_err(crate::error::storage)?.filter(|s| self.visible::<K>(s)))
    }

    /// Loads a record of kind `K` regardless of the viewer (only for reduced `…Info` views).
    ///
    /// # Errors
    /// Storage failures as `INTERNAL`.
    pub fn load_system<K: Kind>(&self, key: &Key) -> Result<Option<Stored<K::Record>>, Error> {
        self.view.get::<K>(key).map_err(crate::error::storage)
    }
}
