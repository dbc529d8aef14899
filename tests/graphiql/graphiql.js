// Drives the GraphiQL page in headless Chromium; started by tests/graphiql/run.sh.
// Env: BASE_URL (running server), CHROMIUM, OUT_DIR, WORLD_DIR (the server's manifests, edited to
// cause a subscription event). Every request outside the server is blocked (and reported): the
// page must work without internet access.
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const BASE_URL = mustEnv('BASE_URL');
const OUT_DIR = path.resolve(mustEnv('OUT_DIR'));
const WORLD_DIR = path.resolve(mustEnv('WORLD_DIR'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SCREENSHOT = path.join(OUT_DIR, 'graphiql.png'); // target/graphiql/graphiql.png via run.sh

// Mock token of team payments--checkout (poc, read); see README.md.
const TOKEN =
  'eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJjbGllbnRJZCI6InBheW1lbnRzLS1jaGVja291dC0tY29uc29sZSIsInNjb3BlIjoidGFyZGlzOnRlYW06cmVhZCIsImVudiI6InBvYyJ9.mock';
const HEADERS = `{"Authorization": "Bearer ${TOKEN}"}`;
const QUERY = '{ applications { totalCount edges { node { name } } } }';
// Applications of team payments--checkout in poc (examples/world/FACTS.md).
const EXPECTED_NAMES = ['checkout-api', 'checkout-batch', 'checkout-web'];
const SUBSCRIPTION = 'subscription { changes(kinds: [APPLICATION]) { operation node { ... on Application { name statusMessage } } } }';
const EDITED_MESSAGE = 'edited while GraphiQL listens';

/** The value of metric `name` on the server (0 when absent). */
async function metric(name) {
  const text = await (await fetch(`${BASE_URL}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** Sets the status message of application `app` in the world's manifests. */
function editMessage(app, message) {
  const file = path.join(WORLD_DIR, '04-applications.yaml');
  const docs = fs.readFileSync(file, 'utf8').split('\n---\n');
  const i = docs.findIndex((d) => d.includes(`\n  name: ${app}\n`));
  if (i < 0) throw new Error(`application ${app} not in ${file}`);
  docs[i] = docs[i].replace(/\n    message: [^\n]*/, `\n    message: ${message}`);
  fs.writeFileSync(file, docs.join('\n---\n'));
}

const LAUNCH_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

function mustEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`missing env ${name}`);
  return v;
}

function log(msg) {
  process.stderr.write(`[graphiql] ${msg}\n`);
}

/** Sets a CodeMirror editor's text the way a user would: focus, select all, type. */
async function typeInto(page, editorSelector, text) {
  const cm = page.locator(`${editorSelector} .CodeMirror`);
  await cm.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  // insertText does not go through key events, so CodeMirror's bracket auto-close stays out of it.
  await page.keyboard.insertText(text);
  const value = await cm.evaluate((el) => el.CodeMirror.getValue());
  if (value !== text) throw new Error(`editor ${editorSelector} holds ${JSON.stringify(value)}, wanted ${JSON.stringify(text)}`);
}

// Everything that went wrong, reported at the end (also when a step throws).
const problems = [];

async function main() {
  const t0 = Date.now();
  const served = [];

  // The ground truth: the same query sent directly.
  const direct = await (await fetch(`${BASE_URL}/graphql/query`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ query: QUERY }),
  })).json();
  const directNames = direct.data.applications.edges.map((e) => e.node.name).sort();
  if (JSON.stringify(directNames) !== JSON.stringify(EXPECTED_NAMES)) {
    throw new Error(`direct query returned ${JSON.stringify(directNames)}, expected ${JSON.stringify(EXPECTED_NAMES)}`);
  }

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: LAUNCH_ARGS, headless: true });
  let page;
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 860 }, deviceScaleFactor: 1 });
    page = await context.newPage();
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    // Expected noise: the 401 of the schema fetch on load (no token yet), React dev-mode warnings.
    page.on('console', (m) => { if (m.type() === 'error') log(`console: ${m.text().split('\n')[0]}`); });

    // Offline: only the server answers; anything else is refused and reported.
    await page.route('**/*', async (route) => {
      const url = route.request().url();
      if (url.startsWith(BASE_URL)) {
        if (url.startsWith(`${BASE_URL}/graphql/assets/`)) served.push(url.slice(BASE_URL.length));
        return route.continue();
      }
      problems.push(`request outside the server: ${url}`);
      return route.abort();
    });

    // Record what GraphiQL sends when we run the query.
    const sent = [];
    page.on('request', (r) => {
      if (r.url() === `${BASE_URL}/graphql/query` && r.method() === 'POST') {
        sent.push({ auth: r.headers().authorization, body: r.postData() || '' });
      }
    });

    log(`opening ${BASE_URL}/graphql`);
    await page.goto(`${BASE_URL}/graphql`, { waitUntil: 'load' });
    await page.locator('.graphiql-query-editor .CodeMirror').waitFor({ timeout: 20000 });
    const title = await page.title();
    if (title !== 'ControlPlane API') problems.push(`page title is ${JSON.stringify(title)}`);

    // Request headers: open the Headers tab of the editor tools and type the token.
    await page.locator('.graphiql-editor-tools button[data-name="headers"]').click();
    const headersEditor = '.graphiql-editor-tool .graphiql-editor:not(.hidden)';
    await page.locator(`${headersEditor} .CodeMirror`).waitFor();
    await typeInto(page, headersEditor, HEADERS);
    await page.keyboard.press('Control+Home'); // scroll back so the screenshot shows "Authorization"
    const headersShown = await page.locator(`${headersEditor} .CodeMirror`).innerText();
    if (!headersShown.includes('"Authorization": "Bearer ')) problems.push(`headers editor shows ${JSON.stringify(headersShown)}`);

    // The schema fetched on load had no token (401); fetch it again with the header, as a user would.
    const introspected = page.waitForResponse((r) => r.url() === `${BASE_URL}/graphql/query`
      && (r.request().postData() || '').includes('IntrospectionQuery') && !!r.request().headers().authorization);
    await page.locator('button[aria-label="Re-fetch GraphQL schema"]').click();
    const schemaResponse = await introspected;
    if (schemaResponse.status() !== 200) problems.push(`introspection with the token answered HTTP ${schemaResponse.status()}`);

    // The schema documentation, loaded with the token.
    await page.locator('button[aria-label="Show Documentation Explorer"]').click();
    await page.locator('.graphiql-doc-explorer').getByText('Query', { exact: true }).first().click();
    await page.locator('.graphiql-doc-explorer').getByText('applications', { exact: true }).first().waitFor({ timeout: 10000 });

    await typeInto(page, '.graphiql-query-editor', QUERY);
    const ran = page.waitForResponse((r) => r.url() === `${BASE_URL}/graphql/query` && r.request().method() === 'POST'
      && (r.request().postData() || '').includes('applications'));
    await page.locator('.graphiql-execute-button').click();
    const response = await ran;
    if (response.status() !== 200) problems.push(`query answered HTTP ${response.status()}`);

    // Wait for the result pane to show every expected name.
    const resultPane = page.locator('.graphiql-response .CodeMirror');
    await page.waitForFunction(
      (names) => {
        const el = document.querySelector('.graphiql-response .CodeMirror');
        const text = el && el.innerText;
        return !!text && names.every((n) => text.includes(`"${n}"`));
      },
      EXPECTED_NAMES,
      { timeout: 15000 },
    );
    await page.screenshot({ path: SCREENSHOT });
    log(`screenshot ${SCREENSHOT}`);

    // Assertions on the result pane text (what the user sees) and on what was sent.
    const shown = await resultPane.innerText();
    const result = JSON.parse(await resultPane.evaluate((el) => el.CodeMirror.getValue()));
    if (result.errors) problems.push(`result has errors: ${JSON.stringify(result.errors)}`);
    if (JSON.stringify(result) !== JSON.stringify(direct)) {
      problems.push(`GraphiQL result differs from the direct query:\n${JSON.stringify(result)}\n${JSON.stringify(direct)}`);
    }
    if (!shown.includes(`"totalCount": ${EXPECTED_NAMES.length}`)) problems.push(`result pane does not show totalCount ${EXPECTED_NAMES.length}`);
    for (const n of EXPECTED_NAMES) if (!shown.includes(`"${n}"`)) problems.push(`result pane lacks ${n}`);
    const queryRequest = sent.find((s) => s.body.includes('applications'));
    if (!queryRequest) problems.push('GraphiQL sent no query request');
    else if (queryRequest.auth !== `Bearer ${TOKEN}`) problems.push(`query request had Authorization ${JSON.stringify(queryRequest.auth)}`);
    const schemaRequest = sent.find((s) => s.body.includes('IntrospectionQuery') && s.auth === `Bearer ${TOKEN}`);
    if (!schemaRequest) problems.push('no introspection request with the token was seen');
    for (const want of ['react.production.min.js', 'react-dom.production.min.js', 'graphiql.min.js', 'graphiql.min.css']) {
      if (!served.some((s) => s.endsWith(`/${want}`))) problems.push(`${want} was never loaded from the server`);
    }
    log(`loaded from the server: ${[...new Set(served)].join(', ')}`);
    log(`result pane:\n${shown}`);

    // A subscription: GraphiQL opens its WebSocket (graphql-transport-ws) with the headers as
    // connection_init payload; a manifest edit shows up as an event in the result pane.
    const active = await metric('controlplane_subscriptions_active');
    await typeInto(page, '.graphiql-query-editor', SUBSCRIPTION);
    // GraphiQL parses the editor 100 ms after a change and picks the transport from that parse.
    await page.waitForFunction(() => {
      const cm = document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror;
      const ast = cm && cm.documentAST;
      return !!ast && ast.definitions.some((d) => d.operation === 'subscription');
    }, null, { timeout: 10000 });
    await page.locator('.graphiql-execute-button').click();
    for (let i = 0; (await metric('controlplane_subscriptions_active')) <= active; i++) {
      if (i > 300) throw new Error('the subscription did not start within 30 s');
      await page.waitForTimeout(100); // the server's metric is the barrier; this is its poll
    }
    editMessage('checkout-api', EDITED_MESSAGE);
    await page.waitForFunction(
      (message) => {
        const el = document.querySelector('.graphiql-response .CodeMirror');
        return !!el && el.innerText.includes(message);
      },
      EDITED_MESSAGE,
      { timeout: 30000 },
    );
    const event = JSON.parse(await resultPane.evaluate((el) => el.CodeMirror.getValue()));
    const change = event.data && event.data.changes;
    if (!change || change.operation !== 'UPDATED' || change.node.name !== 'checkout-api') {
      problems.push(`subscription event is ${JSON.stringify(event)}`);
    }
    await page.screenshot({ path: path.join(OUT_DIR, 'graphiql-subscription.png') });
    log(`subscription event:\n${JSON.stringify(event)}`);
  } catch (e) {
    const failure = path.join(OUT_DIR, 'graphiql-failure.png');
    if (page) await page.screenshot({ path: failure }).then(() => log(`failure screenshot ${failure}`), () => {});
    throw e;
  } finally {
    await browser.close();
  }

  if (problems.length) {
    for (const p of problems) log(`FAIL: ${p}`);
    process.exit(1);
  }
  log(`ok: GraphiQL showed ${EXPECTED_NAMES.join(', ')} (${((Date.now() - t0) / 1000).toFixed(1)} s in the browser)`);
}

main().catch((e) => {
  for (const p of problems) log(`FAIL: ${p}`);
  log(`FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
