-- NOT part of the reference schema: the team isolation of the Go server it comes from (its privacy
-- interceptor: a team reads the records its teams own) written as PostgreSQL row-level security, the way a team
-- serving this schema with PostGraphile would. Applied by load-world.sh to `controlplane_tuned`
-- only, after fk-indexes.sql (mode `tuned` of serve.sh).
--
-- Each request's team arrives as the JWT claim `team` (`group--team`, the stored team name);
-- PostGraphile verifies the token (--jwt-secret) and sets it as `jwt.claims.team` for the
-- request's transaction, after `SET LOCAL ROLE cp_viewer` (its default role). cp_viewer is not a
-- superuser, has no BYPASSRLS and owns no table, so the policies below apply to it.

DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cp_viewer') THEN
        CREATE ROLE cp_viewer NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cp_authenticator') THEN
        -- PostGraphile connects as this role and can only switch to cp_viewer (NOINHERIT).
        CREATE ROLE cp_authenticator LOGIN NOINHERIT NOSUPERUSER NOBYPASSRLS;
    END IF;
END $$;
GRANT cp_viewer TO cp_authenticator;
GRANT USAGE ON SCHEMA public TO cp_viewer;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO cp_viewer;
REVOKE SELECT ON ent_types FROM cp_viewer;

-- The viewer's team id: one index lookup on the unique teams.name (as a sub-select in the policies,
-- so it runs once per statement as an InitPlan and the FK indexes can be used).
CREATE SCHEMA cp_private;  -- not exposed by PostGraphile (it serves `public` only)
GRANT USAGE ON SCHEMA cp_private TO cp_viewer;
CREATE FUNCTION cp_private.team_id() RETURNS bigint LANGUAGE sql STABLE AS
    $$ SELECT id FROM public.teams WHERE name = current_setting('jwt.claims.team', true) $$;

-- Team-owned rows: the team column, or the owning application's team column.
ALTER TABLE teams ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON teams FOR SELECT TO cp_viewer
    USING (name = current_setting('jwt.claims.team', true));
ALTER TABLE members ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON members FOR SELECT TO cp_viewer
    USING (team_members = (SELECT cp_private.team_id()));
ALTER TABLE applications ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON applications FOR SELECT TO cp_viewer
    USING (team_applications = (SELECT cp_private.team_id()));
ALTER TABLE api_exposures ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON api_exposures FOR SELECT TO cp_viewer
    USING (application_exposed_apis IN (SELECT id FROM applications WHERE team_applications = (SELECT cp_private.team_id())));
ALTER TABLE api_subscriptions ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON api_subscriptions FOR SELECT TO cp_viewer
    USING (application_subscribed_apis IN (SELECT id FROM applications WHERE team_applications = (SELECT cp_private.team_id())));
ALTER TABLE event_exposures ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON event_exposures FOR SELECT TO cp_viewer
    USING (application_exposed_events IN (SELECT id FROM applications WHERE team_applications = (SELECT cp_private.team_id())));
ALTER TABLE event_subscriptions ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON event_subscriptions FOR SELECT TO cp_viewer
    USING (application_subscribed_events IN (SELECT id FROM applications WHERE team_applications = (SELECT cp_private.team_id())));
ALTER TABLE permission_sets ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON permission_sets FOR SELECT TO cp_viewer
    USING (application_permission_set IN (SELECT id FROM applications WHERE team_applications = (SELECT cp_private.team_id())));

-- Approvals and approval requests: the OR rule, the team is the requester (subscriber side) or the
-- decider (provider side). Both team names are columns of the row (`requester` JSON, as the
-- projector writes it, and `decider_team_name`); the two indexes make the predicate index-friendly
-- (a BitmapOr of two index scans instead of a scan of the table).
CREATE INDEX rls_approvals_requester_team ON approvals ((requester ->> 'teamName'));
CREATE INDEX rls_approvals_decider_team ON approvals (decider_team_name);
CREATE INDEX rls_approval_requests_requester_team ON approval_requests ((requester ->> 'teamName'));
CREATE INDEX rls_approval_requests_decider_team ON approval_requests (decider_team_name);
ALTER TABLE approvals ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON approvals FOR SELECT TO cp_viewer
    USING (requester ->> 'teamName' = current_setting('jwt.claims.team', true)
           OR decider_team_name = current_setting('jwt.claims.team', true));
ALTER TABLE approval_requests ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_isolation ON approval_requests FOR SELECT TO cp_viewer
    USING (requester ->> 'teamName' = current_setting('jwt.claims.team', true)
           OR decider_team_name = current_setting('jwt.claims.team', true));

-- The subscription's target exposure belongs to another team, so the policy on api_exposures hides
-- it from the subscriber; the reference serves it as a reduced cross-tenant view (ApiExposureInfo,
-- read with the system context). The PostgreSQL way: a SECURITY DEFINER computed column returning
-- a reduced type, which PostGraphile exposes as `ApiSubscription.target: ApiExposureInfo`.
CREATE TYPE api_exposure_info AS (id bigint, base_path text, visibility character varying, active boolean, api_version text);
CREATE FUNCTION api_subscriptions_target(s api_subscriptions) RETURNS api_exposure_info
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS
    $$ SELECT e.id, e.base_path, e.visibility, e.active, e.api_version FROM api_exposures e WHERE e.id = s.api_subscription_target $$;

-- Zones, groups, apis, event_types: catalogue data, unfiltered (as in the reference).
ANALYZE;
