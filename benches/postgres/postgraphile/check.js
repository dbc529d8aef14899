// Answer equivalence of Q1/Q3/Q4 on our server and the PostGraphile peers, for one team.
//
//   node check.js --team T --world DIR --out DIR --ours URL --shipped URL --tuned URL
//
// Every answer is reduced to its records (names and values, ids dropped: each server has its
// own) and compared with ours; the raw answers go to --out. Our Q3 also lists approvals of
// agentic and file subscriptions, which have no table in the reference schema: they are looked
// up in the world (spec.target.kind) and compared apart. Exit code 1 on any difference.
'use strict';
const fs = require('fs');
const path = require('path');
const util = require('util');
const { server, gql, q1Connection, variables } = require('./client');

const { values: a } = util.parseArgs({ options: Object.fromEntries(
    ['team', 'world', 'out', 'ours', 'shipped', 'tuned'].map((k) => [k, { type: 'string' }])) });
for (const k of ['team', 'world', 'out', 'ours']) if (!a[k]) { console.error(`check.js: --${k} missing`); process.exit(2); }

const sortBy = (xs, key) => xs.slice().sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : 0));
const nodes = (conn) => conn.edges.map((e) => e.node);

// Q1: applications with their nested connections, PostGraphile fields mapped onto ours.
function q1Records(kind, data) {
    const c = q1Connection(kind, data);
    const pick = (n, ours, pg) => n[kind === 'ours' ? ours : pg];
    const apps = nodes(c).map((n) => ({
        name: n.name, statusPhase: n.statusPhase, secretRotationPhase: n.secretRotationPhase,
        zone: pick(n, 'zone', 'zoneByZoneApplications').name, owner: pick(n, 'ownerTeam', 'teamByTeamApplications').name,
        exposedApis: nested(pick(n, 'exposedApis', 'apiExposuresByApplicationExposedApis'),
            (x) => ({ basePath: x.basePath, visibility: x.visibility, active: x.active, statusPhase: x.statusPhase })),
        subscribedApis: nested(pick(n, 'subscribedApis', 'apiSubscriptionsByApplicationSubscribedApis'), (x) => {
            const t = kind === 'ours' ? x.target : kind === 'shipped' ? x.apiExposureByApiSubscriptionTarget : x.target;
            return { basePath: x.basePath, statusPhase: x.statusPhase, target: t && t.basePath };
        }),
        exposedEvents: nested(pick(n, 'exposedEvents', 'eventExposuresByApplicationExposedEvents'), () => ({})),
        subscribedEvents: nested(pick(n, 'subscribedEvents', 'eventSubscriptionsByApplicationSubscribedEvents'), () => ({})),
    }));
    return { totalCount: c.totalCount, hasNextPage: c.pageInfo.hasNextPage, applications: sortBy(apps, (x) => x.name) };
}
function nested(conn, f) {
    return { totalCount: conn.totalCount, nodes: sortBy(nodes(conn).map(f), (x) => JSON.stringify(x)) };
}

// Q3: approvals (requester/decider are objects on our side, whole JSON values on PostGraphile's).
function q3Records(data) {
    const c = data.approvals;
    const rec = nodes(c).map((n) => ({
        requester: n.requester.teamName, name: n.name, state: n.state, action: n.action, strategy: n.strategy,
        applicationName: n.requester.applicationName ?? null, decider: n.decider.teamName, deciderTeamName: n.deciderTeamName,
    }));
    return { totalCount: c.totalCount, hasNextPage: c.pageInfo.hasNextPage, approvals: sortBy(rec, (x) => `${x.requester}/${x.name}`) };
}

function q4Record(kind, data) {
    const n = kind === 'ours' ? data.node : data.application;
    return kind === 'ours'
        ? { name: n.name, statusPhase: n.statusPhase, clientId: n.clientID, owner: n.ownerTeam.name, zone: n.zone.name }
        : { name: n.name, statusPhase: n.statusPhase, clientId: n.clientId, owner: n.teamByTeamApplications.name, zone: n.zoneByZoneApplications.name };
}

// Target kind of every approval of the world, by `<requester team>/<name>`.
function approvalKinds(world) {
    const kinds = new Map();
    for (const line of fs.readFileSync(path.join(world, '19-approvals.yaml'), 'utf8').split('\n')) {
        if (!line.startsWith('{')) continue;
        const o = JSON.parse(line);
        kinds.set(`${o.spec.requester.teamName}/${o.metadata.name}`, o.spec.target.kind);
    }
    return kinds;
}

function diff(label, want, got) {
    const w = JSON.stringify(want, null, 1);
    const g = JSON.stringify(got, null, 1);
    if (w === g) { console.log(`  ${label}: same records`); return 0; }
    const wl = w.split('\n');
    const gl = g.split('\n');
    const i = wl.findIndex((l, k) => l !== gl[k]);
    console.log(`  ${label}: DIFFERENT (first at line ${i}: ours ${wl[i]} | peer ${gl[i]})`);
    return 1;
}

(async () => {
    fs.mkdirSync(a.out, { recursive: true });
    const ours = server('ours', a.ours, a.team);
    const ov = await variables(ours);
    const answers = { ours: { Q1: await gql(ours, 'Q1', ov.Q1), Q3: await gql(ours, 'Q3', ov.Q3), Q4: await gql(ours, 'Q4', ov.Q4) } };
    const kinds = approvalKinds(a.world);
    const ours3 = q3Records(answers.ours.Q3);
    const refKinds = new Set(['ApiSubscription', 'EventSubscription']);
    const tableless = ours3.approvals.filter((x) => !refKinds.has(kinds.get(`${x.requester}/${x.name}`)));
    const ours3ref = { totalCount: ours3.totalCount - tableless.length, hasNextPage: ours3.hasNextPage,
        approvals: ours3.approvals.filter((x) => refKinds.has(kinds.get(`${x.requester}/${x.name}`))) };
    if (ours3.hasNextPage) console.log('  (our Q3 has more than one page: only the first 50 are compared)');
    const summary = { team: a.team, q4Application: ov.q4Name, ours: { Q1: q1Records('ours', answers.ours.Q1).totalCount,
        Q3: ours3.totalCount, Q3_without_tableless_kinds: ours3ref.totalCount, Q3_tableless: tableless.length } };
    let bad = 0;
    for (const kind of ['shipped', 'tuned']) {
        if (!a[kind]) continue;
        const srv = server(kind, a[kind], a.team);
        const v = await variables(srv, ov.q4Name);
        answers[kind] = { Q1: await gql(srv, 'Q1', v.Q1), Q3: await gql(srv, 'Q3', v.Q3), Q4: await gql(srv, 'Q4', v.Q4) };
        console.log(`${kind} vs ours (team ${a.team}, Q4 application ${ov.q4Name}):`);
        bad += diff('Q1', q1Records('ours', answers.ours.Q1), q1Records(kind, answers[kind].Q1));
        const q3 = q3Records(answers[kind].Q3);
        bad += diff(`Q3 (ours without the ${tableless.length} agentic/file approvals)`, ours3ref, q3);
        bad += diff('Q4', q4Record('ours', answers.ours.Q4), q4Record(kind, answers[kind].Q4));
        summary[kind] = { Q1: q1Records(kind, answers[kind].Q1).totalCount, Q3: q3.totalCount };
    }
    for (const [k, v] of Object.entries(answers)) fs.writeFileSync(path.join(a.out, `answers-${k}.json`), JSON.stringify(v, null, 1));
    fs.writeFileSync(path.join(a.out, 'check.json'), JSON.stringify({ ...summary, differences: bad }, null, 1));
    console.log(JSON.stringify(summary));
    process.exit(bad ? 1 : 0);
})().catch((e) => { console.error(`check.js: ${e.message}`); process.exit(1); });
