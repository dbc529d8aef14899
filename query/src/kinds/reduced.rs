//! The parent values of the reduced cross-tenant views (`…ExposureInfo`, `…SubscriptionInfo`):
//! an exposure lists its subscriptions and a subscription shows its target through them, so
//! they live below both kinds' modules. Their fields are registered by the kinds' modules.

use storage::Stored;

/// The parent value of an `ApiExposureInfo`.
pub struct ApiExposureInfo(pub Stored<schema::kinds::api_exposure::ApiExposureRecord>);

/// The parent value of an `EventExposureInfo`.
pub struct EventExposureInfo(pub Stored<schema::kinds::event_exposure::EventExposureRecord>);

/// The parent value of a `FileExposureInfo`.
pub struct FileExposureInfo(pub Stored<schema::kinds::file_exposure::FileExposureRecord>);

/// The parent value of an `AgenticExposureInfo`.
pub struct AgenticExposureInfo(pub Stored<schema::kinds::agentic_exposure::AgenticExposureRecord>);

/// The parent value of an `ApiSubscriptionInfo`.
pub struct ApiSubscriptionInfo(pub Stored<schema::kinds::api_subscription::ApiSubscriptionRecord>);

/// The parent value of an `EventSubscriptionInfo`.
pub struct EventSubscriptionInfo(pub Stored<schema::kinds::event_subscription::EventSubscriptionRecord>);

/// The parent value of a `FileSubscriptionInfo`.
pub struct FileSubscriptionInfo(pub Stored<schema::kinds::file_subscription::FileSubscriptionRecord>);

/// The parent value of an `AgenticSubscriptionInfo`.
pub struct AgenticSubscriptionInfo(pub Stored<schema::kinds::agentic_subscription::AgenticSubscriptionRecord>);

/// The GraphQL name of [`AgenticSubscriptionInfo`].
pub const AGENTIC_SUBSCRIPTION_INFO: &str = "AgenticSubscriptionInfo";

/// The GraphQL name of [`FileSubscriptionInfo`].
pub const FILE_SUBSCRIPTION_INFO: &str = "FileSubscriptionInfo";
