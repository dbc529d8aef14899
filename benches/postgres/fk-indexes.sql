-- NOT part of the reference schema (ent creates no index for FK columns on PostgreSQL).
-- Applied by baseline.py only for the extra "tuned" P2 run (--tuned), after the reference P2 run,
-- to show how much of the baseline latency is due to the missing FK indexes.
CREATE INDEX tuned_applications_team ON applications (team_applications);
CREATE INDEX tuned_api_exposures_app ON api_exposures (application_exposed_apis);
CREATE INDEX tuned_api_subscriptions_app ON api_subscriptions (application_subscribed_apis);
CREATE INDEX tuned_api_subscriptions_target ON api_subscriptions (api_subscription_target);
CREATE INDEX tuned_event_exposures_app ON event_exposures (application_exposed_events);
CREATE INDEX tuned_event_subscriptions_app ON event_subscriptions (application_subscribed_events);
CREATE INDEX tuned_event_subscriptions_target ON event_subscriptions (event_subscription_target);
CREATE INDEX tuned_approval_requests_api_sub ON approval_requests (api_subscription_approval_requests);
CREATE INDEX tuned_approval_requests_event_sub ON approval_requests (event_subscription_approval_requests);
ANALYZE;
