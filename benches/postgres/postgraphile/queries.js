// The console queries Q1, Q3, Q4 of benches/http_queries.rs, for our server and as PostGraphile
// documents over the reference schema (one team; see README "PostGraphile peer").
//
// ours     the constants Q1, Q3, Q4 of benches/http_queries.rs, verbatim; the team comes from the
//          token (team viewer), Q4 takes the global ID of the team's first application.
// shipped  no authentication or isolation in the database: the query names the team. Q1 starts
//          at `teamByName` (unique teams.name) and follows the foreign keys; Q3 filters with the
//          OR rule on the approval's team columns (connection-filter plugin).
// tuned    row-level security restricts every table to the JWT's team, so Q1/Q3 are top-level
//          connections like ours; `target` is rls.sql's SECURITY DEFINER computed column.
// Q4 is the same in both PostGraphile modes: `application(id:)` (the row's bigint id).
'use strict';

const ours = {
    Q1: 'query Q1 { applications(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { cursor node { ' +
        'id name statusPhase secretRotationPhase zone { name } ownerTeam { name } ' +
        'exposedApis(first: 20) { totalCount edges { node { id basePath visibility active statusPhase } } } ' +
        'subscribedApis(first: 20) { totalCount edges { node { id basePath statusPhase target { basePath } } } } ' +
        'exposedEvents(first: 20) { totalCount edges { node { id } } } ' +
        'subscribedEvents(first: 20) { totalCount edges { node { id } } } } } } }',
    Q3: 'query Q3 { approvals(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { node { ' +
        'id name state action strategy requester { teamName applicationName } decider { teamName } deciderTeamName } } } }',
    Q4: 'query Q4($id: ID!) { node(id: $id) { id ... on Application { name statusPhase clientID ownerTeam { name } zone { name } } } }',
};

// The application connection's selection, with the subscription target as each mode has it.
const appConnection = (target) =>
    '(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { cursor node { ' +
    'id name statusPhase secretRotationPhase zoneByZoneApplications { name } teamByTeamApplications { name } ' +
    'apiExposuresByApplicationExposedApis(first: 20) { totalCount edges { node { id basePath visibility active statusPhase } } } ' +
    `apiSubscriptionsByApplicationSubscribedApis(first: 20) { totalCount edges { node { id basePath statusPhase ${target} { basePath } } } } ` +
    'eventExposuresByApplicationExposedEvents(first: 20) { totalCount edges { node { id } } } ' +
    'eventSubscriptionsByApplicationSubscribedEvents(first: 20) { totalCount edges { node { id } } } } } }';
const approvalConnection = (args) =>
    `approvals(first: 50${args}) { totalCount pageInfo { endCursor hasNextPage } edges { node { ` +
    'id name state action strategy requester decider deciderTeamName } } }';
const q4 = 'query Q4($id: BigInt!) { application(id: $id) { id name statusPhase clientId ' +
    'teamByTeamApplications { name } zoneByZoneApplications { name } } }';

const shipped = {
    Q1: 'query Q1($team: String!) { teamByName(name: $team) { applicationsByTeamApplications' +
        appConnection('apiExposureByApiSubscriptionTarget') + ' } }',
    Q3: 'query Q3($team: String!) { ' + approvalConnection(', filter: { or: [' +
        '{ requester: { contains: { teamName: $team } } }, { deciderTeamName: { equalTo: $team } }] }') + ' }',
    Q4: q4,
};

const tuned = {
    Q1: 'query Q1 { applications' + appConnection('target') + ' }',
    Q3: 'query Q3 { ' + approvalConnection('') + ' }',
    Q4: q4,
};

module.exports = { ours, shipped, tuned };
