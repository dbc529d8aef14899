// Shared by check.js and load.js: the three servers' endpoints, credentials and query variables.
'use strict';
const http = require('http');
const jwt = require('jsonwebtoken');
const queries = require('./queries');

// Mock token of our server (`--auth mock`): base64url JSON header . base64url JSON claims . mock,
// claims as benches/support/mod.rs `team_token` (a team viewer with read access).
function mockToken(team) {
    const enc = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
    return `${enc({ alg: 'none' })}.${enc({ clientId: `${team}--console`, scope: 'tardis:team:read', env: 'poc' })}.mock`;
}

// The JWT of serve.sh's `tuned` mode (same as jwt.js).
function peerJwt(team) {
    const secret = process.env.JWT_SECRET || 'cp-postgraphile-peer-benchmark-only';
    return jwt.sign({ team }, secret, { algorithm: 'HS256', audience: 'postgraphile', expiresIn: '24h' });
}

// kind: ours | shipped | tuned; url: the GraphQL endpoint.
function server(kind, url, team) {
    const headers = { 'content-type': 'application/json' };
    if (kind === 'ours') headers.authorization = `Bearer ${mockToken(team)}`;
    else if (kind === 'tuned') headers.authorization = `Bearer ${peerJwt(team)}`;
    else if (kind !== 'shipped') throw new Error(`unknown server kind ${kind}`);
    return { kind, url: new URL(url), headers, docs: queries[kind], team };
}

// POSTs one GraphQL request; resolves {status, body (string), ms}.
function post(srv, payload, agent) {
    return new Promise((resolve, reject) => {
        const data = Buffer.from(payload);
        const t0 = process.hrtime.bigint();
        const req = http.request({
            host: srv.url.hostname, port: srv.url.port, path: srv.url.pathname, method: 'POST', agent,
            headers: { ...srv.headers, 'content-length': data.length },
        }, (res) => {
            const chunks = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => resolve({
                status: res.statusCode, body: Buffer.concat(chunks).toString(),
                ms: Number(process.hrtime.bigint() - t0) / 1e6,
            }));
            res.on('error', reject);
        });
        req.on('error', reject);
        req.end(data);
    });
}

async function gql(srv, name, variables, agent) {
    const r = await post(srv, JSON.stringify({ query: srv.docs[name], variables }), agent);
    const body = JSON.parse(r.body);
    if (r.status !== 200 || body.errors) throw new Error(`${srv.kind} ${name}: HTTP ${r.status} ${r.body.slice(0, 500)}`);
    return body.data;
}

// The Q1 connection of any server's answer.
function q1Connection(kind, data) {
    return kind === 'shipped' ? data.teamByName.applicationsByTeamApplications : data.applications;
}

// Variables of Q1/Q3/Q4: Q4 takes the team's first application of Q1 (as benches/http_queries.rs
// `setup` does); for the PostGraphile modes the application with that name (argument `q4Name`).
async function variables(srv, q4Name) {
    const team = srv.kind === 'shipped' ? { team: srv.team } : {};
    const q1 = q1Connection(srv.kind, await gql(srv, 'Q1', team));
    const edges = q1.edges.filter((e) => q4Name === undefined || e.node.name === q4Name);
    if (edges.length === 0) throw new Error(`${srv.kind}: no application ${q4Name ?? ''} in Q1's answer`);
    return { Q1: team, Q3: team, Q4: { id: edges[0].node.id }, q4Name: edges[0].node.name };
}

module.exports = { server, post, gql, q1Connection, variables, mockToken, peerJwt };
