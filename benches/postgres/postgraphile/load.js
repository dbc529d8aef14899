// The one load client of the peer comparison (no `ab` on this machine): C concurrent clients on one
// keep-alive agent (C sockets), each sending the given queries in turn (Q1, Q3, Q4, Q1, ... with
// client i starting at query i mod n, so the mix stays in equal parts), for --warmup seconds
// unrecorded and then --seconds recorded. No churn.
//
//   node load.js --server ours|shipped|tuned --url URL --team T [--q4-name NAME]
//                [--queries Q1,Q3,Q4] [--clients 16] [--seconds 15] [--warmup 3] [--out FILE]
//
// Reported: completed requests/s in the recorded window, errors (non-200 or a GraphQL `errors`),
// p50/p99 per query and overall (ms, client-side, from writing the request to the last byte), the
// machine's CPU use (/proc/stat) and this client's own CPU (it shares the 2 cores with the server).
// Exit code 3 (results written all the same) when another build or test process ran during the
// recorded window (otherWork below): bench.sh then repeats the run.
'use strict';
const fs = require('fs');
const http = require('http');
const os = require('os');
const util = require('util');
const { server, post, variables } = require('./client');

const { values: a } = util.parseArgs({ options: {
    server: { type: 'string' }, url: { type: 'string' }, team: { type: 'string' }, 'q4-name': { type: 'string' },
    queries: { type: 'string', default: 'Q1,Q3,Q4' }, clients: { type: 'string', default: '16' },
    seconds: { type: 'string', default: '15' }, warmup: { type: 'string', default: '3' }, out: { type: 'string' },
} });
for (const k of ['server', 'url', 'team']) if (!a[k]) { console.error(`load.js: --${k} missing`); process.exit(2); }

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : null);
const round = (x) => (x === null ? null : Math.round(x * 1000) / 1000);
// Other work on this machine (another engineer's builds and tests) seen during the recorded
// window: compilers, cargo, cargo-nextest and the test binaries they run (target/*/deps/*).
function otherWork() {
    let n = 0;
    for (const pid of fs.readdirSync('/proc')) {
        if (!/^[0-9]+$/.test(pid)) continue;
        try {
            const comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
            const exe = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
            if (/^(rustc|rustdoc|cargo|cargo-nextest|cc1|cc|ld|ld\.lld|collect2)$/.test(comm) || /\/target\/[^/]+\/deps\//.test(exe)) n += 1;
        } catch { /* exited */ }
    }
    return n;
}
function cpuTicks() {  // [busy, total] of all CPUs
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + f[4];
    const total = f.reduce((s, x) => s + x, 0);
    return [total - idle, total];
}

(async () => {
    const srv = server(a.server, a.url, a.team);
    const names = a.queries.split(',');
    const clients = Number(a.clients);
    const vars = await variables(srv, a['q4-name']);
    const bodies = Object.fromEntries(names.map((q) => [q, JSON.stringify({ query: srv.docs[q], variables: vars[q] })]));
    const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
    const lat = Object.fromEntries(names.map((q) => [q, []]));
    const errors = Object.fromEntries(names.map((q) => [q, 0]));
    const firstError = {};
    let recording = false;
    const start = Date.now();
    const recordFrom = start + Number(a.warmup) * 1000;
    const stopAt = recordFrom + Number(a.seconds) * 1000;
    let othersMax = 0;
    const sampler = setInterval(() => { if (recording) othersMax = Math.max(othersMax, otherWork()); }, 1000);
    let cpu0;
    let self0;
    let t0;
    const flip = setTimeout(() => {
        recording = true;
        cpu0 = cpuTicks();
        self0 = process.cpuUsage();
        t0 = process.hrtime.bigint();
    }, recordFrom - start);

    async function client(i) {
        for (let k = i; Date.now() < stopAt; k++) {
            const q = names[k % names.length];
            let ok = false;
            let r;
            try {
                r = await post(srv, bodies[q], agent);
                ok = r.status === 200 && !r.body.includes('"errors":');
            } catch (e) {
                r = { ms: 0, body: String(e) };
            }
            if (!recording || Date.now() > stopAt) continue;
            lat[q].push(r.ms);
            if (!ok) {
                errors[q] += 1;
                firstError[q] ??= r.body.slice(0, 300);
            }
        }
    }
    await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
    clearTimeout(flip);
    clearInterval(sampler);
    othersMax = Math.max(othersMax, otherWork());
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu1 = cpuTicks();
    const self = process.cpuUsage(self0);
    agent.destroy();

    const all = [];
    const perQuery = {};
    for (const q of names) {
        const s = lat[q].sort((x, y) => x - y);
        for (const x of s) all.push(x);
        perQuery[q] = { requests: s.length, rps: round(s.length / wall), errors: errors[q], p50_ms: round(pct(s, 50)), p99_ms: round(pct(s, 99)) };
        if (firstError[q]) perQuery[q].firstError = firstError[q];
    }
    all.sort((x, y) => x - y);
    const res = {
        server: a.server, url: a.url, team: a.team, queries: names, q4: vars.q4Name, clients, warmupS: Number(a.warmup),
        seconds: round(wall), requests: all.length, rps: round(all.length / wall), errors: Object.values(errors).reduce((s, x) => s + x, 0),
        p50_ms: round(pct(all, 50)), p99_ms: round(pct(all, 99)), perQuery,
        machineCpuBusyPct: round((100 * (cpu1[0] - cpu0[0])) / (cpu1[1] - cpu0[1])),
        clientCpuPctOfOneCore: round(((self.user + self.system) / 1e6 / wall) * 100),
        otherWorkProcessesSeenMax: othersMax, loadavgEnd: os.loadavg(), finishedAt: new Date().toISOString(),
    };
    if (a.out) fs.writeFileSync(a.out, JSON.stringify(res, null, 1));
    for (const q of names) {
        const p = perQuery[q];
        console.log(`| ${a.server} | ${names.join('+')} | ${q} | ${p.rps} | ${p.p50_ms} | ${p.p99_ms} | ${p.errors} | ${othersMax} |`);
    }
    if (names.length > 1) {
        console.log(`| ${a.server} | ${names.join('+')} | all | ${res.rps} | ${res.p50_ms} | ${res.p99_ms} | ${res.errors} | ${othersMax} |`);
    }
    console.error(`  (${a.server} ${names.join('+')}: ${res.requests} requests in ${res.seconds} s, machine CPU ${res.machineCpuBusyPct} %, ` +
        `client CPU ${res.clientCpuPctOfOneCore} % of one core, build/test processes seen ${othersMax})`);
    process.exitCode = othersMax > 0 ? 3 : 0;  // measured, but not on a quiet machine
})().catch((e) => { console.error(`load.js: ${e.message}`); process.exit(1); });
