//! The projector runtime, generic over [`schema::Kind`]: [`handlers`] (the erased per-kind
//! decode → translate pipeline, built from [`schema::registry`]) and [`writer`] (the one task
//! that owns every store write, with batching and retries), whose retry policy is [`retry`].
//!
//! **Architecture invariant:** no kind has code of its own here; a new kind needs only its
//! registry line in `schema`.

pub mod handlers;
pub mod retry;
pub mod writer;
