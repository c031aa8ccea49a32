// The console, end to end, in a real browser: Debian's headless Chromium
// driven by playwright-core, against the switchyard binary with offline
// upstreams (the in-process vendor fake, and a lane whose port refuses).
//
//   SWITCHYARD_BIN=target/debug/switchyard node tests/console/console.test.mjs
//
// Scenario: sign in; a failing lane goes red with its breaker's reason and
// is reset; a key is created, its secret shown once and used from the
// official OpenAI SDK; its spend appears; it is revoked and the SDK's next
// call is refused; a read-only token can change nothing; a tenant admin of acme sees
// acme's subtree and none of globex's keys, groups or spend, at 1440 and
// 390 px; a budget past its warning and forecast to run out, the ledger's
// drift against a provider's usage and cost reports, and an open socket and
// a pinned session each have their view; an agent run past its call cap
// is listed limited and another is killed from the Runs page. Every page loads
// in under 300 ms with 10,000 ledger rows, passes axe-core, and is saved as
// a screenshot under CONSOLE_ARTIFACTS (default target/console-artifacts).

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import http from 'node:http';
import { createHash, generateKeyPairSync, randomBytes, sign as signBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import OpenAI from 'openai';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const bin = process.env.SWITCHYARD_BIN || path.join(root, 'target/debug/switchyard');
const artifacts = process.env.CONSOLE_ARTIFACTS || path.join(root, 'target/console-artifacts');
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
const LEDGER_ROWS = Number(process.env.CONSOLE_LEDGER_ROWS || 10000);
const PAGE_BUDGET_MS = 300;
// What one visit of a page may cost the gateway in CPU (its API calls),
// with the ledger above, in the debug build CI runs. Machines differ by 2x
// and more (the overview cost 6-8 ms here and 13.3 ms on CI's machine): the
// bound is there to catch a visit that does an order more work, such as a
// page that reads the ledger whole, not to time the machine.
const REFRESH_CPU_MS = Number(process.env.CONSOLE_REFRESH_CPU_MS || 40);
const FULL = 'ops-token-for-the-console-test-0001';
const READ = 'viewer-token-for-the-console-test-01';
const TENANT = 'acme-lead-token-for-the-console-test';
const PAGES = ['', 'pools', 'keys', 'groups', 'spend', 'usage', 'requests', 'alerts', 'mcp', 'playground', 'config',
  // The views of wave 4's surfaces (views.js).
  'budgets', 'reconciliation', 'sessions', 'runs'];
// The sizes every page is checked at: a laptop and a phone.
const SIZES = [{ name: 'desktop', width: 1440, height: 900 }, { name: 'phone', width: 390, height: 844 }];

const freePort = () => new Promise((resolve, reject) => {
  const server = createServer();
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address();
    server.close(() => resolve(port));
  });
  server.on('error', reject);
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, check, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await check();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

function step(name) {
  console.log(`-- ${name}`);
}

// A caller's WebSocket to the Responses API, by hand (Node 20 has no
// client): the upgrade with the key, then masked text frames out; what
// comes back is kept as raw bytes (its events are read as text).
async function responsesSocket(port, key) {
  const socket = connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
  let received = Buffer.alloc(0);
  socket.on('data', (chunk) => { received = Buffer.concat([received, chunk]); });
  socket.write(`GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`
    + `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${key}\r\n\r\n`);
  await until('the socket to open', async () => /^HTTP\/1\.1 101/.test(received.toString('latin1')), 5000);
  const send = (text) => {
    const payload = Buffer.from(text);
    const mask = randomBytes(4);
    const length = payload.length < 126 ? Buffer.from([0x80 | payload.length])
      : Buffer.from([0x80 | 126, payload.length >> 8, payload.length & 0xff]);
    const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]));
    socket.write(Buffer.concat([Buffer.from([0x81]), length, mask, masked]));
  };
  const text = () => received.toString('latin1');
  return { send, text, close: () => socket.destroy() };
}

const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-console-'));
mkdirSync(artifacts, { recursive: true });
const [dataPort, adminPort] = [await freePort(), await freePort()];
const refusedPort = await freePort(); // nothing listens there: the broken lane's upstream
// The alerts webhook: what the gateway posts is kept.
const alertsReceived = [];
const alertsPort = await freePort();
const alertsServer = http.createServer((request, response) => {
  let body = '';
  request.on('data', (chunk) => { body += chunk; });
  request.on('end', () => {
    try { alertsReceived.push(JSON.parse(body)); } catch { /* not JSON: ignored */ }
    response.writeHead(200).end();
  });
});
await new Promise((resolve) => alertsServer.listen(alertsPort, '127.0.0.1', resolve));
const data = `http://127.0.0.1:${dataPort}`;
const admin = `http://127.0.0.1:${adminPort}`;
const adminPortForReports = adminPort;

// A small OpenID Connect provider for single sign-on: discovery, an
// authorization endpoint that signs in a member, a token endpoint that
// checks PKCE and the client secret, and its key as a JWKS.
const oidcPort = await freePort();
const idpBase = `http://127.0.0.1:${oidcPort}`;
const idpKeys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const idpJwk = { ...idpKeys.publicKey.export({ format: 'jwk' }), kid: 'console-test', use: 'sig', alg: 'ES256' };
const idpCodes = new Map();
const b64url = (bytes) => Buffer.from(bytes).toString('base64url');
const idToken = (claims) => {
  const signed = `${b64url(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: 'console-test' }))}.${b64url(JSON.stringify(claims))}`;
  return `${signed}.${b64url(signBytes('sha256', Buffer.from(signed), { key: idpKeys.privateKey, dsaEncoding: 'ieee-p1363' }))}`;
};
const idp = http.createServer((req, res) => {
  const url = new URL(req.url, idpBase);
  const json = (status, value) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(value)); };
  if (url.pathname === '/.well-known/openid-configuration') {
    return json(200, { issuer: idpBase, authorization_endpoint: `${idpBase}/authorize`, token_endpoint: `${idpBase}/token`, jwks_uri: `${idpBase}/jwks` });
  }
  if (url.pathname === '/jwks') return json(200, { keys: [idpJwk] });
  if (url.pathname === '/authorize') {
    const code = randomBytes(16).toString('hex');
    idpCodes.set(code, { challenge: url.searchParams.get('code_challenge'), nonce: url.searchParams.get('nonce') });
    res.writeHead(302, { location: `${url.searchParams.get('redirect_uri')}?code=${code}&state=${encodeURIComponent(url.searchParams.get('state'))}` });
    return res.end();
  }
  if (url.pathname === '/token' && req.method === 'POST') {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const issued = idpCodes.get(form.get('code'));
      idpCodes.delete(form.get('code'));
      const challenge = createHash('sha256').update(form.get('code_verifier') || '').digest('base64url');
      if (!issued || issued.challenge !== challenge || form.get('client_secret') !== 'console-test-secret') return json(400, { error: 'invalid_grant' });
      const now = Math.floor(Date.now() / 1000);
      const claims = { iss: idpBase, aud: 'switchyard-console', sub: 'member-1', email: 'lee@acme.example', groups: ['staff'], nonce: issued.nonce, iat: now, exp: now + 300 };
      return json(200, { token_type: 'Bearer', access_token: 'unused', id_token: idToken(claims) });
    });
    return undefined;
  }
  res.writeHead(404);
  return res.end();
});
await new Promise((resolve) => idp.listen(oidcPort, '127.0.0.1', resolve));

// A provider's admin API for reconciliation (OpenAI's organization usage
// and costs): it reports 5 % more tokens than the ledger holds for the
// lane demo-openai today (read from the admin API when asked), and bills
// exactly the ledger's cost: a token drift past the tolerance, a cost
// drift within it.
const reportsPort = await freePort();
const RECONCILE_ADMIN_KEY = 'sk-admin-console-test';
const reports = http.createServer(async (req, res) => {
  const url = new URL(req.url, `http://127.0.0.1:${reportsPort}`);
  const json = (status, value) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(value)); };
  if (req.headers.authorization !== `Bearer ${RECONCILE_ADMIN_KEY}`) return json(401, { error: { message: 'bad admin key' } });
  const start = Number(url.searchParams.get('start_time'));
  const end = Number(url.searchParams.get('end_time'));
  const today = Math.floor(Date.now() / 86400000) * 86400;
  let lane = { input_tokens: 0, output_tokens: 0, usd: 0, requests: 0 };
  try {
    const spend = await (await fetch(`http://127.0.0.1:${adminPortForReports}/api/v1/admin/spend?by=lane&from=${today}`, { headers: { authorization: `Bearer ${FULL}` } })).json();
    lane = spend.data.find((line) => line.value === 'demo-openai') || lane;
  } catch { /* the gateway is starting: nothing served yet */ }
  const buckets = (results) => {
    const data = [];
    for (let day = start; day < end; day += 86400) data.push({ object: 'bucket', start_time: day, end_time: day + 86400, results: day === today ? results : [] });
    return { object: 'page', data, has_more: false, next_page: null };
  };
  if (url.pathname === '/v1/organization/usage/completions') {
    return json(200, buckets(lane.requests ? [{
      object: 'organization.usage.completions.result', model: 'gpt-4o-mini',
      input_tokens: Math.round(lane.input_tokens * 1.05), output_tokens: Math.round(lane.output_tokens * 1.05),
      input_cached_tokens: 0, input_audio_tokens: 0, output_audio_tokens: 0, num_model_requests: lane.requests,
      project_id: null, user_id: null, api_key_id: null, batch: null,
    }] : []));
  }
  if (url.pathname === '/v1/organization/costs') {
    return json(200, buckets(lane.requests ? [{
      object: 'organization.costs.result', amount: { value: lane.usd, currency: 'usd' }, line_item: 'gpt-4o-mini, input', project_id: null,
    }] : []));
  }
  return json(404, { error: { message: 'no such report' } });
});
await new Promise((resolve) => reports.listen(reportsPort, '127.0.0.1', resolve));

const configText = () => readFileSync(path.join(dir, 'switchyard.yaml'), 'utf8');
// A literal provider key and comments: the config editor keeps both.
const PROVIDER_KEY = 'sk-console-test-literal-provider-key';
const COMMENTS = ['# The console test\'s gateway, as an operator writes one.', '# The vendor fakes; one key written in the file.', '# the usual split'];
writeFileSync(path.join(dir, 'switchyard.yaml'), `${COMMENTS[0]}
listen: 127.0.0.1:${dataPort}
admin_listen: 127.0.0.1:${adminPort}
auth: { mode: keys }
admin:
  tokens:
    - { name: ops, token: ${FULL}, scope: full }
    - { name: viewer, token: ${READ}, scope: read }
  tenants: [{ name: acme-lead, token: ${TENANT}, group: acme }]
  oidc:
    issuer: ${idpBase}
    client_id: switchyard-console
    client_secret: console-test-secret
    redirect_url: ${admin}/ui/oidc/callback
    scopes: [email, groups]
    roles: [{ claim: groups, value: staff, role: member }]
    members: { parent: people, budget: { usd: 5, window: 1d }, max_keys: 3 }
storage: { sqlite_path: ${path.join(dir, 'switchyard.db')} }
governance: { ledger_flush_interval: 200ms, suspend: { after: 3, within: 1m, for: 1h } }
alerts: { webhook: "http://127.0.0.1:${alertsPort}/alerts", dedup: 5m }
reconcile:
  tolerance: 2%
  every: 1m
  days: 1
  openai: { admin_key: ${RECONCILE_ADMIN_KEY}, base_url: "http://127.0.0.1:${reportsPort}", providers: [mock-openai] }
providers:
  ${COMMENTS[1]}
  mock-openai: { protocol: openai, base_url: "mock://", api_key: ${PROVIDER_KEY} }
  mock-anthropic: { protocol: anthropic, base_url: "mock://" }
  refusing: { protocol: openai, base_url: "http://127.0.0.1:${refusedPort}" }
models:
  demo-openai: { provider: mock-openai, model: gpt-4o-mini }
  demo-anthropic: { provider: mock-anthropic, model: claude-sonnet-4-5 }
  broken-openai: { provider: refusing, model: gpt-4o-mini }
  demo-embed: { provider: mock-openai, model: text-embedding-3-small, operation: embed }
rate_card:
  demo-openai: { input_utok: 0.15, output_utok: 0.6 }
  demo-anthropic: { input_utok: 3, output_utok: 15 }
  broken-openai: { input_utok: 0.15, output_utok: 0.6 }
  demo-embed: { input_utok: 0.02 }
pools:
  demo: { members: [{ model: demo-openai, weight: 3 }, { model: demo-anthropic, weight: 1 }] } ${COMMENTS[2]}
  flaky: { members: [{ model: broken-openai, weight: 9 }, { model: demo-openai, weight: 1 }] }
mcp:
  servers:
    notes: { command: "${process.execPath}", args: ["${path.join(here, 'mcp-notes.mjs')}"], price_per_call: 0.01 }
groups:
  acme: { budget: { usd: 100, window: 1mo } }
  acme-research: { parent: acme, budget: { usd: 20, window: 1d } }
  people: { budget: { usd: 50, window: 1mo } }
  globex: { budget: { usd: 70, window: 1mo } }
  agents: { runs: { calls: 2, wall: 30m } }
`);

const gateway = spawn(bin, ['--config', path.join(dir, 'switchyard.yaml')], {
  stdio: ['ignore', 'pipe', 'pipe'],
  env: { ...process.env, SWITCHYARD_LOG: 'warn' },
});
let gatewayLog = '';
gateway.stdout.on('data', (d) => { gatewayLog += d; });
gateway.stderr.on('data', (d) => { gatewayLog += d; });

let browser;
let failed = false;
try {
  await until('the admin listener', async () => (await fetch(`${admin}/healthz`)).ok);
  const adminApi = async (method, route, body, token = FULL) => {
    const response = await fetch(`${admin}/api/v1/admin/${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  };

  step(`${LEDGER_ROWS} requests of traffic, so the ledger has its rows`);
  const bulk = await adminApi('POST', 'keys', { name: 'bulk-traffic', group: 'acme-research', mcp: ['notes'] });
  assert.equal(bulk.status, 201);
  const chat = (key, model) => fetch(`${data}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello from the console test' }], max_tokens: 16 }),
  });
  let sent = 0;
  const worker = async () => {
    while (sent < LEDGER_ROWS) {
      sent += 1;
      const response = await chat(bulk.body.key, 'demo');
      assert.equal(response.status, 200, await response.text());
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: 16 }, worker));
  console.log(`   ${LEDGER_ROWS} requests in ${Date.now() - started} ms`);
  await until('every row in the ledger', async () => {
    const stats = await (await fetch(`${admin}/stats`, { headers: { authorization: `Bearer ${FULL}` } })).json();
    return stats.governance.ledger.rows_written >= LEDGER_ROWS;
  }, 60000);

  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const axeSource = readFileSync(path.join(here, 'node_modules/axe-core/axe.min.js'), 'utf8');

  const signIn = async (token) => {
    const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on('console', (message) => { if (message.type() === 'error') errors.push(message.text()); });
    page.on('pageerror', (err) => errors.push(String(err)));
    const dialogs = [];
    page.on('dialog', (dialog) => { dialogs.push(dialog.message()); dialog.accept(); });
    await page.goto(`${admin}/ui/`);
    assert.equal(new URL(page.url()).pathname, '/ui/login', 'an anonymous browser is sent to the login form');
    await page.getByLabel('Admin token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForSelector('body[data-ready="true"]');
    return { context, page, errors, dialogs };
  };

  // A page's load time: from the start of its navigation to the moment it
  // has drawn its data (the mark the console sets), read in the page.
  const open = async (page, name) => {
    await page.goto(`${admin}/ui/${name}`);
    await page.waitForSelector('body[data-ready="true"]');
    return page.evaluate(() => performance.getEntriesByName('switchyard-ready')[0].startTime);
  };

  step('a wrong token is refused at the login form');
  {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${admin}/ui/login`);
    await page.getByLabel('Admin token').fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    assert.match(await page.getByRole('alert').textContent(), /not one of this gateway's admin tokens/);
    await page.screenshot({ path: path.join(artifacts, 'login-refused.png') });
    await page.evaluate(readFileSync(path.join(here, 'node_modules/axe-core/axe.min.js'), 'utf8'));
    const login = await page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
    assert.deepEqual(login.violations.map((v) => v.id), [], 'axe-core on /ui/login');
    await context.close();
  }

  step('sign in with the full token: the session is an HttpOnly, SameSite=Strict cookie');
  const ops = await signIn(FULL);
  const cookies = await ops.context.cookies();
  const session = cookies.find((c) => c.name === 'switchyard_session');
  assert.ok(session && session.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
  assert.ok(!session.value.includes(FULL), 'the cookie is a session id, not the admin token');
  assert.equal(await ops.page.evaluate(() => document.cookie), '', 'script cannot read the session');
  assert.equal(await ops.page.evaluate(() => localStorage.length + sessionStorage.length), 0);
  const headers = (await ops.page.request.get(`${admin}/ui/`)).headers();
  assert.match(headers['content-security-policy'], /script-src 'self'/);
  assert.doesNotMatch(headers['content-security-policy'], /unsafe-inline|unsafe-eval/);
  assert.match(headers['content-security-policy'], /frame-ancestors 'none'/);

  step('a mutation without the anti-CSRF token is refused');
  const noCsrf = await ops.page.evaluate(async () => (await fetch('/api/v1/admin/keys', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'forged' }),
  })).status);
  assert.equal(noCsrf, 403);
  ops.errors.length = 0; // the browser logged that refusal; any later error is real

  step('the overview shows the traffic');
  await ops.page.getByRole('heading', { name: 'Last hour' }).waitFor();
  await until('the sampler to count the traffic', async () => {
    await open(ops.page, '');
    const counted = await ops.page.evaluate(() => {
      const tile = [...document.querySelectorAll('section[aria-label="Last hour"] .tile')]
        .find((t) => t.querySelector('dt').textContent === 'Requests');
      return Number(tile.querySelector('dd').textContent.replace(/,/g, ''));
    });
    return counted >= LEDGER_ROWS;
  }, 20000);
  assert.match(await ops.page.locator('#content').textContent(), /Every lane is up/);

  step('a failing lane goes red with its reason, and is reset');
  for (let i = 0; i < 20; i += 1) {
    const response = await chat(bulk.body.key, 'flaky');
    assert.equal(response.status, 200, 'the pool fails over to its healthy lane');
  }
  await open(ops.page, 'pools');
  const brokenRow = ops.page.getByRole('row').filter({ hasText: 'broken-openai' }).first();
  await until('the broken lane to open', async () => {
    await open(ops.page, 'pools');
    return (await brokenRow.locator('.badge').textContent()) === 'open';
  });
  const reason = await brokenRow.textContent();
  assert.match(reason, /refused|connect|transport|unreachable/i, `the breaker says why: ${reason}`);
  const red = await brokenRow.locator('.badge').evaluate((el) => getComputedStyle(el).backgroundColor);
  assert.equal(red, 'rgb(176, 0, 32)', 'an open breaker is red');
  await ops.page.screenshot({ path: path.join(artifacts, 'pools-lane-down.png'), fullPage: true });
  await open(ops.page, '');
  assert.match(await ops.page.locator('section[aria-label="Lanes down"]').textContent(), /broken-openai/);
  assert.match(await ops.page.locator('#content').innerText(), /Requests\/s, last minute/);
  assert.match(await ops.page.locator('section[aria-label="Top keys today"]').innerText(), /bulk-traffic/);
  assert.match(await ops.page.locator('section[aria-label="Busiest pools, last minutes"]').innerText(), /flaky|demo/);
  await until('the open alert on the overview', async () => {
    await open(ops.page, '');
    return /breaker opened[\s\S]*broken-openai/.test(await ops.page.locator('section[aria-label="Open alerts"]').textContent());
  });
  await until('the alert at the webhook', async () => alertsReceived.some((a) => a.kind === 'breaker_opened' && /broken-openai/.test(a.subject)));
  await ops.page.screenshot({ path: path.join(artifacts, 'overview-lane-down.png'), fullPage: true });
  await open(ops.page, 'pools');
  await ops.page.getByRole('button', { name: 'Reset breaker of broken-openai in flaky' }).click();
  await until('the breaker to close', async () => (await brokenRow.locator('.badge').textContent()) === 'closed');
  assert.match(await ops.page.locator('#status').textContent(), /reset/);

  step('a lane is drained, weighed and given back; its p50/p99 shows');
  const demoRow = (lane) => ops.page.getByRole('row').filter({ hasText: lane }).filter({ has: ops.page.getByRole('button', { name: `Drain ${lane} in demo` }).or(ops.page.getByRole('button', { name: `Undrain ${lane} in demo` })) });
  await open(ops.page, 'pools');
  assert.match(await demoRow('demo-openai').innerText(), /\d ms \/ \d/, 'the lane shows its recent p50 / p99');
  await ops.page.getByRole('button', { name: 'Drain demo-anthropic in demo' }).click();
  await until('the drained badge', async () => /drained/.test(await demoRow('demo-anthropic').innerText()));
  for (let i = 0; i < 8; i += 1) {
    const response = await chat(bulk.body.key, 'demo');
    assert.equal(response.headers.get('x-switchyard-lane'), 'demo-openai', 'a drained lane takes no new requests');
  }
  await ops.page.screenshot({ path: path.join(artifacts, 'pools-drained.png'), fullPage: true });
  await ops.page.getByLabel('Weight of demo-openai in demo', { exact: true }).fill('5');
  await demoRow('demo-openai').getByRole('button', { name: 'Set' }).click();
  await until('the new weight', async () => /configured 3/.test(await demoRow('demo-openai').innerText()));
  await ops.page.getByLabel('Weight of demo-openai in demo', { exact: true }).fill('3');
  await demoRow('demo-openai').getByRole('button', { name: 'Set' }).click();
  await until('the configured weight again', async () => !/configured/.test(await demoRow('demo-openai').innerText()));
  await ops.page.getByRole('button', { name: 'Undrain demo-anthropic in demo' }).click();
  await until('the lane back', async () => !/drained/.test(await demoRow('demo-anthropic').innerText()));

  step('create a key: its secret is shown once, with a copy button');
  await open(ops.page, 'keys');
  const createForm = ops.page.getByRole('form', { name: 'Create a key' });
  await createForm.getByLabel('Name').fill('console-e2e');
  await createForm.getByLabel('Group').selectOption('acme');
  await createForm.getByLabel('Budget USD').fill('5');
  await createForm.getByLabel('Requests per minute').fill('100');
  await ops.page.getByRole('button', { name: 'Create key' }).click();
  await ops.page.locator('#secret').waitFor();
  const secret = await ops.page.locator('#secret').textContent();
  assert.match(secret, /^sy-/);
  await ops.page.getByRole('button', { name: 'Copy' }).click();
  await until('the copy button to answer', async () => /Copied|Selected/.test(await ops.page.locator('#copy').textContent()));
  await ops.page.screenshot({ path: path.join(artifacts, 'keys-created.png'), fullPage: true });
  await open(ops.page, 'keys');
  assert.equal(await ops.page.locator('#secret').count(), 0, 'the secret is not shown again');
  const keyRow = ops.page.getByRole('row').filter({ hasText: 'console-e2e' });
  const keyId = (await keyRow.locator('code').first().textContent()).trim();

  step('use the key from the official OpenAI SDK');
  const client = new OpenAI({ apiKey: secret, baseURL: `${data}/v1`, maxRetries: 0 });
  for (let i = 0; i < 3; i += 1) {
    const completion = await client.chat.completions.create({
      model: 'demo', messages: [{ role: 'user', content: 'spend a little' }], max_tokens: 32,
    });
    assert.ok(completion.choices[0].message.content.length > 0);
  }
  const embedded = await client.embeddings.create({ model: 'demo-embed', input: ['one passage', 'another passage'] });
  assert.equal(embedded.data.length, 2);

  step('its spend appears');
  await until('the key on the spend page', async () => {
    await open(ops.page, 'spend?by=key');
    const row = ops.page.getByRole('row').filter({ hasText: keyId });
    if (await row.count() === 0) return false;
    const cells = await row.locator('td').allTextContents();
    return cells[1] === '4' && /\$0\.0000\d\d|\$0\.\d+/.test(cells[6]);
  });
  const csv = await ops.page.evaluate(async () => {
    const href = document.querySelector('a.download').getAttribute('href');
    const response = await fetch(href);
    return { type: response.headers.get('content-type'), text: await response.text() };
  });
  assert.match(csv.type, /text\/csv/);
  assert.match(csv.text, new RegExp(`^key,name,requests,.*,usd,saved_usd,cache_hits,guardrail_decisions,refused,price_usd\r\n`));
  assert.equal(await ops.page.getByRole('columnheader', { name: 'Saved' }).count(), 1, 'cost saved by the cache has a column');
  assert.match(csv.text, new RegExp(`"${keyId}","console-e2e",4,`));
  await ops.page.screenshot({ path: path.join(artifacts, 'spend.png'), fullPage: true });
  // Spend by operation: the chat calls and the embeddings call apart.
  await open(ops.page, 'spend?by=operation');
  const chatRow = ops.page.getByRole('row').filter({ hasText: /^chat/ });
  const embedRow = ops.page.getByRole('row').filter({ hasText: /^embed/ });
  // Chat holds the key's three calls and the unkeyed traffic before them.
  const chatRequests = Number((await chatRow.locator('td').allTextContents())[1].replace(/,/g, ''));
  assert.ok(chatRequests >= 3, `chat requests: ${chatRequests}`);
  const embedCells = await embedRow.locator('td').allTextContents();
  assert.equal(embedCells[1], '1');
  assert.equal(embedCells[3], '0', 'an embedding has no output tokens');
  await ops.page.screenshot({ path: path.join(artifacts, 'spend-by-operation.png'), fullPage: true });
  await open(ops.page, 'keys');
  const bars = keyRow.locator('meter');
  assert.equal(await bars.count(), 2, 'a budget bar and a rate headroom bar');
  const used = Number(await bars.first().getAttribute('value'));
  assert.ok(used > 0 && used < 0.01, `the budget bar shows the spend: ${used}`);

  step('playground: a prompt as the key, in another dialect, to the demo pool');
  await open(ops.page, 'playground');
  const play = ops.page.getByRole('form', { name: 'Send a prompt' });
  await play.getByLabel('Dialect').selectOption('anthropic');
  await play.getByLabel('Pool or model').selectOption('demo');
  await play.getByLabel('Key (its secret; empty on an open gateway)').fill(secret);
  await play.getByLabel('Prompt').fill('hello from the playground');
  await play.getByRole('button', { name: 'Send' }).click();
  await ops.page.locator('#playground-result dl').waitFor();
  const played = await ops.page.locator('#playground-result').innerText();
  assert.match(played, /Status\s+200/);
  assert.match(played, /Lane that answered\s+demo-(openai|anthropic)/);
  assert.match(played, /hello from the playground/);
  assert.match(played, /Cost at today's rate card\s+\$0\.0/);
  await ops.page.screenshot({ path: path.join(artifacts, 'playground.png'), fullPage: true });
  // Bedrock too: Converse with the key as a bearer token.
  await play.getByLabel('Dialect').selectOption('bedrock');
  await play.getByRole('button', { name: 'Send' }).click();
  await until('the Bedrock reply', async () => /inferenceConfig/.test(await ops.page.locator('#playground-result').textContent()));
  assert.match(await ops.page.locator('#playground-result').innerText(), /Status\s+200/);

  step('mcp: the server, its tool approved in place, and the call in the list');
  {
    const mcp = async (body, session) => fetch(`${data}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bulk.body.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(session ? { 'mcp-session-id': session } : {}) },
      body: JSON.stringify(body),
    });
    const hello = await mcp({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'console-test', version: '1' } } });
    assert.equal(hello.status, 200, await hello.text());
    const mcpSession = hello.headers.get('mcp-session-id');
    const called = await (await mcp({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'notes__read_note', arguments: { id: 'n-1' } } }, mcpSession)).json();
    assert.equal(called.result.content[0].text, 'note n-1', JSON.stringify(called));
    await open(ops.page, 'mcp');
    const toolRow = ops.page.getByRole('row').filter({ hasText: 'notes__read_note' });
    assert.match(await ops.page.getByRole('table', { name: 'MCP servers' }).innerText(), /notes\s+stdio/);
    assert.equal(await toolRow.locator('.badge').textContent(), 'unreviewed');
    await ops.page.getByRole('button', { name: 'Approve notes__read_note' }).click();
    await until('the tool to be pinned', async () => (await toolRow.locator('.badge').textContent()) === 'approved');
    await until('the call in the list', async () => {
      await open(ops.page, 'mcp');
      return /notes__read_note[\s\S]*200/.test(await ops.page.getByRole('table', { name: 'MCP tool calls, newest first' }).innerText());
    });
    await ops.page.screenshot({ path: path.join(artifacts, 'mcp.png'), fullPage: true });
  }

  step('revoke it: the SDK call after is refused');
  await open(ops.page, 'keys');
  await ops.page.getByRole('button', { name: 'Revoke console-e2e' }).click();
  await until('the key to be revoked', async () => /revoked/.test(await ops.page.locator('#status').textContent()));
  // A revoked key is hidden unless asked for.
  await until('revoked keys hidden by default', async () => (await keyRow.count()) === 0);
  await open(ops.page, 'keys?revoked=show');
  assert.equal(await keyRow.locator('.badge').textContent(), 'revoked');
  await assert.rejects(
    client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'again' }] }),
    (err) => err instanceof OpenAI.AuthenticationError && err.status === 401,
  );

  step('requests: filters and one request\'s detail');
  await open(ops.page, `requests?key=${keyId}`);
  const rows = ops.page.locator('tbody tr');
  assert.equal(await rows.count(), 6, 'three chat calls, an embedding and the playground\'s two prompts');
  await rows.first().getByRole('link').click();
  await ops.page.waitForSelector('body[data-ready="true"]');
  await ops.page.locator('dl.detail').waitFor();
  const detail = await ops.page.locator('dl.detail').textContent();
  assert.match(detail, new RegExp(keyId));
  assert.doesNotMatch(await ops.page.locator('#content').innerText(), /\[object |\bnull\b/, 'the detail shows no object or null where text belongs');
  assert.match(detail, /demo-openai|demo-anthropic|demo-embed/);
  await ops.page.screenshot({ path: path.join(artifacts, 'request-detail.png'), fullPage: true });
  const flaky = await adminApi('GET', 'requests?pool=flaky&limit=100');
  const failedOver = flaky.body.data.find((r) => r.failovers > 0);
  assert.ok(failedOver, 'a flaky request failed over');
  await open(ops.page, `requests?id=${failedOver.id}`);
  const attemptRows = await ops.page.getByRole('table', { name: 'Upstream attempts in order' }).locator('tbody tr').allTextContents();
  assert.match(attemptRows[0], /broken-openai.*no answer.*unreachable/);
  assert.match(attemptRows[attemptRows.length - 1], /demo-openai.*200.*answered/);
  await ops.page.screenshot({ path: path.join(artifacts, 'request-detail-failover.png'), fullPage: true });

  step('requests: status classes filter, and a bad filter keeps the form');
  await open(ops.page, 'requests?status=2xx');
  assert.ok(await ops.page.locator('tbody tr').count() > 0, 'a class filters');
  // Refusals at the door are in the log too (the revoked key's call).
  await until('the refusal in the log', async () => {
    await open(ops.page, 'requests?status=401');
    return /refused: authentication/.test(await ops.page.locator('#content').innerText());
  });
  {
    // A request's detail says why: a refusal reached no provider, a request
    // whose every attempt failed names no lane as the one that answered.
    const refusal = (await adminApi('GET', 'requests?status=401&limit=1')).body.data[0];
    await open(ops.page, `requests?id=${refusal.id}`);
    const said = await ops.page.locator('#content').innerText();
    assert.match(said, /Refused before any provider was reached: authentication/);
    assert.match(said, /No upstream attempt: no provider was reached/);
    assert.doesNotMatch(said, /answered 401/);
    assert.equal((await chat(bulk.body.key, 'broken-openai')).status >= 500, true, 'a lane nobody serves fails');
    let failed;
    await until('the failed request in the log', async () => {
      failed = (await adminApi('GET', 'requests?pool=broken-openai&limit=1')).body.data[0];
      return failed;
    });
    await open(ops.page, `requests?id=${failed.id}`);
    const told = await ops.page.locator('#content').innerText();
    assert.match(told, /Every attempt failed .*no lane answered/);
    assert.match(told, /Lane that answered\s+none \(the last tried: broken-openai\)/);
    assert.doesNotMatch(told, /broken-openai answered/);
    // At 390 px the detail is no wider than the screen, and passes axe-core.
    await ops.page.setViewportSize({ width: 390, height: 844 });
    for (const id of [refusal.id, failed.id]) {
      await open(ops.page, `requests?id=${id}`);
      const wide = await ops.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(wide <= 0, `a request's detail at 390 px is ${wide} px wider than the screen`);
      await ops.page.evaluate(readFileSync(path.join(here, 'node_modules/axe-core/axe.min.js'), 'utf8'));
      const result = await ops.page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'], rules: { 'target-size': { enabled: true } } }));
      assert.deepEqual(result.violations.map((v) => v.id), [], 'axe-core on a request\'s detail at 390 px');
    }
    await ops.page.screenshot({ path: path.join(artifacts, 'request-detail-phone.png'), fullPage: true });
    await ops.page.setViewportSize({ width: 1366, height: 900 });
    await adminApi('POST', 'lanes/broken-openai/broken-openai/reset');
  }
  {
    const one = (await adminApi('GET', 'requests?status=2xx&limit=1')).body.data[0];
    await open(ops.page, `requests?request_id=${encodeURIComponent(one.request_id)}`);
    assert.equal(await ops.page.locator('tbody tr').count(), 1, 'a request id finds its row');
    // A time range: the minute that row finished in finds it, the year 2000 nothing.
    const minute = new Date(one.at_ms).toISOString().slice(0, 16);
    const next = new Date(one.at_ms + 60000).toISOString().slice(0, 16);
    await open(ops.page, `requests?from=${minute}&to=${next}&request_id=${encodeURIComponent(one.request_id)}`);
    assert.equal(await ops.page.locator('tbody tr').count(), 1, 'the range holds it');
    await open(ops.page, 'requests?key=console-e2e');
  assert.equal(await ops.page.locator('tbody tr').count(), 6, 'a key found by its name');
  await open(ops.page, 'requests?from=2000-01-01T00:00&to=2000-01-02T00:00');
    assert.match(await ops.page.locator('#content').innerText(), /No requests match/);
  }
  assert.equal(await ops.page.getByRole('alert').count(), 0);
  await open(ops.page, 'requests?status=5xx');
  assert.equal(await ops.page.getByRole('form', { name: 'Filter requests' }).count(), 1, 'the form stays');
  const expectedErrors = (before, status) => {
    // The browser logs the refusal this step asks for; nothing else may appear.
    const added = ops.errors.splice(before);
    const reason = { 400: 'Bad Request', 404: 'Not Found', 412: 'Precondition Failed' }[status];
    assert.deepEqual(added, [`Failed to load resource: the server responded with a status of ${status} (${reason})`]);
  };
  let errorsBefore = ops.errors.length;
  await open(ops.page, 'requests?status=bogus');
  assert.equal(await ops.page.getByRole('form', { name: 'Filter requests' }).count(), 1, 'the form stays on a bad filter');
  assert.match(await ops.page.getByRole('alert').textContent(), /bogus/);
  expectedErrors(errorsBefore, 400);

  step('spend by group: own figures add up to the total, and the page says so');
  await open(ops.page, 'spend?by=group');
  assert.match(await ops.page.locator('#content').innerText(), /includes its children/);
  {
    const total = Number((await ops.page.locator('#content p strong').first().textContent()).replace(/[$,]/g, ''));
    const cells = await ops.page.locator('tbody tr').evaluateAll((rows) => rows.map((row) => row.cells[6].textContent));
    const own = cells.reduce((sum, text) => sum + (Number(text.replace(/[$,–]/g, '')) || 0), 0);
    // Each figure is shown rounded (to cents from $1 up): within that.
    assert.ok(Math.abs(own - total) <= 0.005 * (cells.length + 1), `own ${own} against total ${total}`);
  }

  step('keys: search, and a key edited in place');
  await open(ops.page, 'keys?q=bulk');
  assert.equal(await ops.page.locator('tbody tr').count(), 1, 'the search finds one key');
  assert.doesNotMatch(await ops.page.locator('#content').innerText(), /\bnull\b/, 'no literal null on the keys page');
  await ops.page.getByLabel('Edit bulk-traffic').click();
  await ops.page.getByRole('form', { name: 'Settings of bulk-traffic' }).getByLabel('Requests per minute').fill('100000');
  await ops.page.getByRole('form', { name: 'Settings of bulk-traffic' }).getByLabel('Metadata (a JSON object)').fill('{"team": "console"}');
  await ops.page.getByRole('button', { name: 'Save bulk-traffic' }).click();
  await until('the saved key', async () => /saved/.test(await ops.page.locator('#status').textContent()));
  const edited = await adminApi('GET', `keys/${bulk.body.id}`);
  assert.equal(edited.body.limits.rpm, 100000);
  // The editor saves against the version its page read: a change made
  // meanwhile elsewhere is refused, never overwritten.
  await open(ops.page, 'keys?q=bulk');
  assert.equal((await adminApi('PATCH', `keys/${bulk.body.id}`, { name: 'bulk-traffic' })).status, 200);
  await ops.page.getByLabel('Edit bulk-traffic').click();
  await ops.page.getByRole('form', { name: 'Settings of bulk-traffic' }).getByLabel('Requests per minute').fill('5');
  errorsBefore = ops.errors.length;
  await ops.page.getByRole('button', { name: 'Save bulk-traffic' }).click();
  await until('the stale save refused', async () => /changed since you read it/.test(await ops.page.locator('#status').textContent()));
  assert.equal((await adminApi('GET', `keys/${bulk.body.id}`)).body.limits.rpm, 100000);
  expectedErrors(errorsBefore, 412);
  assert.deepEqual(edited.body.metadata, { team: 'console' });

  step('groups: created, moved in the tree, edited and deleted in place');
  await open(ops.page, 'groups');
  const createGroup = ops.page.getByRole('form', { name: 'Create a group' });
  await createGroup.getByLabel('Name').fill('console-team');
  await createGroup.getByLabel('Budget USD (empty: none)').fill('3');
  await ops.page.getByRole('button', { name: 'Create group' }).click();
  await until('the new group', async () => /created/.test(await ops.page.locator('#status').textContent()));
  await ops.page.getByLabel('Edit console-team').click();
  const teamForm = ops.page.getByRole('form', { name: 'Settings of console-team' });
  await teamForm.getByLabel('Parent').selectOption('acme');
  await teamForm.getByLabel('Requests per minute').fill('60');
  await ops.page.getByRole('button', { name: 'Save console-team' }).click();
  await until('the saved group', async () => /saved/.test(await ops.page.locator('#status').textContent()));
  const team = await adminApi('GET', 'groups/console-team');
  assert.deepEqual([team.body.parent, team.body.limits.rpm, team.body.budget.usd], ['acme', 60, 3]);
  await ops.page.getByLabel('Edit console-team').click();
  await ops.page.getByRole('button', { name: 'Delete console-team' }).click();
  await until('the group gone', async () => (await adminApi('GET', 'groups/console-team')).status === 404);

  step('usage over time: a line per key, each point with its value on hover');
  await open(ops.page, 'usage?by=key&range=24h&metric=requests');
  assert.ok(await ops.page.locator('svg polyline').count() >= 1, 'a line per key');
  const hover = await ops.page.locator('svg circle title').first().textContent();
  assert.match(hover, /bulk-traffic.*: [\d,]+$/);
  await open(ops.page, 'usage?by=user&range=24h&metric=requests');
  // The console's traffic names no end user: one line, "(none)".
  assert.match(await ops.page.getByRole('table').innerText(), /\(none\)/);
  await open(ops.page, 'usage?by=model&range=7d&metric=usd');
  assert.ok(await ops.page.getByRole('table').count() === 1);
  // Refusals at the door are counted beside requests, never as them.
  await open(ops.page, 'usage?by=operation&range=24h&metric=refused');
  const refusedRow = (await ops.page.getByRole('row').filter({ hasText: /^refused/ }).locator('td').allTextContents());
  assert.equal(refusedRow[3], '0', 'a refusal is no request');
  assert.ok(Number(refusedRow[7].replace(/,/g, '')) >= 1, `the revoked key's refusal is counted: ${refusedRow}`);
  await open(ops.page, 'spend?by=operation');
  assert.match(await ops.page.locator('#content p').first().innerText(), /[\d,]+ hits · [\d,]+ guardrail decisions · [1-9][\d,]* refused at the door/);

  step('a key\'s own page: last use, budget and its reset, headroom, a week of spend');
  await open(ops.page, `keys?id=${bulk.body.id}`);
  const keyPage = await ops.page.locator('#content').innerText();
  assert.match(keyPage, /Last used \(UTC\)\s+\d{4}-\d\d-\d\d/);
  assert.match(keyPage, /Requests per minute left/);
  assert.match(keyPage, /Refusals \(latest 500 4xx\)/);
  assert.match(await ops.page.title(), /Key bulk-traffic · Switchyard/);

  step('the 5 s redraw keeps the focus and open sections');
  await open(ops.page, 'pools');
  const directSummary = ops.page.locator('details.direct > summary');
  assert.equal(await directSummary.count(), 1, 'the pools page has its models-named-directly section');
  {
    await directSummary.click();
    const open = await ops.page.locator('details.direct').evaluate((d) => d.open);
    await directSummary.focus();
    await sleep(6000);
    assert.equal(await ops.page.locator('details.direct').evaluate((d) => d.open), open, 'the section stays as it was');
    assert.equal(await ops.page.evaluate(() => document.activeElement && document.activeElement.tagName), 'SUMMARY', 'the focus stays');
  }
  {
    // What is being typed survives the redraw: a pool weight, the alerts filter.
    const weightField = ops.page.getByLabel('Weight of demo-anthropic in demo', { exact: true });
    await weightField.fill('7');
    await sleep(6000);
    assert.equal(await weightField.inputValue(), '7', 'the redraw erased a weight being typed');
    assert.equal(await ops.page.evaluate(() => document.body.dataset.paused), 'true');
    await open(ops.page, 'alerts');
    const who = ops.page.getByLabel('Who');
    await who.pressSequentially('op', { delay: 50 });
    await sleep(6000);
    assert.equal(await who.inputValue(), 'op', 'the redraw erased the alerts filter being typed');
    await who.blur();
    await until('the redraw again once the field is left', async () => (await ops.page.evaluate(() => document.body.dataset.paused)) === 'false', 8000);
  }

  step('a page that does not exist is a 404 with the way on');
  {
    errorsBefore = ops.errors.length;
    const response = await ops.page.goto(`${admin}/ui/nowhere`);
    assert.equal(response.status(), 404);
    await ops.page.waitForSelector('body[data-ready="true"]');
    assert.ok(await ops.page.getByRole('link', { name: 'Spend' }).count() >= 1);
    assert.match(await ops.page.title(), /Not found · Switchyard/);
    expectedErrors(errorsBefore, 404);
  }

  step('config: the running file is redacted; a candidate is validated');
  await open(ops.page, 'config');
  const yaml = await ops.page.locator('pre.yaml').textContent();
  assert.ok(!yaml.includes(FULL) && !yaml.includes(READ) && yaml.includes('<redacted>'));
  await ops.page.getByLabel('Candidate config (YAML)').fill('pools:\n  p: { members: [{ model: nowhere }] }\n');
  await ops.page.getByRole('button', { name: 'Validate candidate' }).click();
  await ops.page.locator('#config-result .problems').waitFor();
  assert.match(await ops.page.locator('#config-result').textContent(), /nowhere/);
  await ops.page.getByRole('button', { name: 'Reload the config file' }).click();
  await until('the reload outcome', async () => /Reloaded: 2 pools/.test(await ops.page.locator('#config-result').textContent()));

  step('config: a candidate diffed, applied as a version, and rolled back');
  await open(ops.page, 'config');
  const added = configText().replace('\npools:\n', '\npools:\n  spare: { members: [{ model: demo-openai }] }\n');
  assert.notEqual(added, configText());
  await ops.page.getByLabel('Candidate config (YAML)').fill(added);
  await ops.page.getByRole('button', { name: 'Diff against the running config' }).click();
  assert.match(await ops.page.locator('#config-result').textContent(), /\+\s+spare:/);
  await ops.page.getByLabel('Why (kept with the version)').fill('a spare pool');
  await ops.page.getByRole('button', { name: 'Apply as a new version' }).click();
  await until('the applied version', async () => /applied/.test(await ops.page.locator('#status').textContent())
    || Promise.reject(new Error(await ops.page.locator('#config-result').textContent())));
  const versions = await adminApi('GET', 'config/versions');
  assert.deepEqual(versions.body.slice(0, 2).map((v) => [v.author, v.message]), [['ops', 'a spare pool'], ['file', 'the file at boot']]);
  assert.equal((await chat(bulk.body.key, 'spare')).status, 200, 'the new version serves');
  await open(ops.page, 'config');
  await ops.page.getByRole('button', { name: 'Roll back to version 1' }).click();
  await until('the rollback', async () => /Rolled back/.test(await ops.page.locator('#status').textContent()));
  assert.equal((await chat(bulk.body.key, 'spare')).status, 404, 'the rollback serves the old text');

  step('config: the running config edited in the console keeps every secret and comment in the file');
  {
    await open(ops.page, 'config');
    const before = configText();
    const editor = ops.page.getByLabel('Candidate config (YAML)');
    await ops.page.getByRole('button', { name: 'Load the running config' }).click();
    const shown = await editor.inputValue();
    for (const secret of [FULL, READ, PROVIDER_KEY, 'console-test-secret']) assert.ok(!shown.includes(secret), `${secret} shown in the editor`);
    for (const comment of COMMENTS) assert.ok(shown.includes(comment), `${comment} missing from the editor`);
    const weighed = (text) => text.replace('demo-openai, weight: 3 }', 'demo-openai, weight: 4 }');
    assert.notEqual(weighed(shown), shown);
    await editor.fill(weighed(shown));
    await ops.page.getByRole('button', { name: 'Validate candidate' }).click();
    await until('the candidate valid, its secrets kept', async () => /valid\. \d+ secrets shown as <redacted> keep the running value/.test(await ops.page.locator('#config-result').textContent())
      || Promise.reject(new Error(await ops.page.locator('#config-result').textContent())));
    ops.dialogs.length = 0;
    await ops.page.getByRole('button', { name: 'Apply as a new version' }).click();
    await until('the applied version', async () => /applied/.test(await ops.page.locator('#status').textContent())
      || Promise.reject(new Error(await ops.page.locator('#config-result').textContent())));
    assert.match(ops.dialogs.join('\n'), /Apply the candidate as version \d+\? It is written to the config file/, 'Apply asks first');
    const after = configText();
    assert.equal(after, weighed(before), 'the file is the operator\'s own text with one weight changed');
    for (const secret of [FULL, READ, PROVIDER_KEY, 'console-test-secret']) assert.ok(after.includes(secret), `${secret} lost from the file`);
    assert.ok(!after.includes('<redacted>'), 'a placeholder reached the file');
    // A placeholder that stands for no running secret is refused, named.
    await open(ops.page, 'config');
    await ops.page.getByRole('button', { name: 'Load the running config' }).click();
    const moved = (await editor.inputValue()).replace('\n  mock-anthropic:', '\n  extra: { protocol: openai, base_url: "mock://", api_key: <redacted> }\n  mock-anthropic:');
    assert.match(moved, /extra:/);
    await editor.fill(moved);
    const errorsBefore = ops.errors.length;
    await ops.page.getByRole('button', { name: 'Apply as a new version' }).click();
    await until('the placeholder refused', async () => /Not applied: .*providers\.extra\.api_key/.test(await ops.page.locator('#config-result').textContent()));
    expectedErrors(errorsBefore, 400);
    // An empty config is refused in the page and by the API.
    await editor.fill('');
    await ops.page.getByRole('button', { name: 'Apply as a new version' }).click();
    await until('the empty config refused', async () => /empty/.test(await ops.page.locator('#config-result').textContent()));
    assert.equal((await adminApi('POST', 'config', { yaml: '# nothing\n' })).status, 400);
    assert.equal(configText(), after, 'nothing refused reached the file');
    // Reload asks first too.
    ops.dialogs.length = 0;
    await ops.page.getByRole('button', { name: 'Reload the config file' }).click();
    await until('the reload outcome', async () => /Reloaded/.test(await ops.page.locator('#config-result').textContent()));
    assert.match(ops.dialogs.join('\n'), /Read the config file on disk again/, 'Reload asks first');
  }

  step('budgets: a key past its warning and forecast to run out stands first, and its warning and forecast are sent');
  {
    const forecast = await adminApi('POST', 'keys', { name: 'forecast-demo', group: 'acme', budget: { usd: 0.001, window: '1mo', warn: [10, 90] } });
    assert.equal(forecast.status, 201);
    const bucket = `key:${forecast.body.id}`;
    // Watched first (the watch's first look says nothing of when what it
    // holds was spent), then spent from.
    await until('the budget watched', async () => {
      const outlook = (await adminApi('GET', `budgets/${encodeURIComponent(bucket)}`)).body;
      return outlook && outlook.burn_usd_per_hour !== null && outlook.burn_usd_per_hour !== undefined;
    });
    // Past its 10 % warning (one lane, so each request costs alike): at
    // that pace, hours from running out, weeks before its month ends.
    for (let i = 0; i < 60; i += 1) {
      const outlook = (await adminApi('GET', `budgets/${encodeURIComponent(bucket)}`)).body;
      if (outlook && outlook.spent_usd / outlook.cap_usd >= 0.12) break;
      assert.equal((await chat(forecast.body.key, 'demo-openai')).status, 200);
    }
    await until('the budget forecast to run out', async () => {
      const outlook = (await adminApi('GET', `budgets/${encodeURIComponent(bucket)}`)).body;
      if (outlook && outlook.exhausts_at > Date.now() / 1000 && outlook.burn_usd_per_hour > 0) return true;
      throw new Error(JSON.stringify(outlook));
    }, 30000);
    const outlook = (await adminApi('GET', `budgets/${encodeURIComponent(bucket)}`)).body;
    assert.deepEqual([outlook.window, outlook.warn], ['1mo', [10, 90]]);
    assert.ok(outlook.window_ends_at > outlook.exhausts_at, JSON.stringify(outlook));
    await open(ops.page, 'budgets');
    const row = ops.page.getByRole('row').filter({ hasText: 'forecast-demo' });
    const cells = await row.locator('td').allInnerTexts();
    assert.equal(cells[1], 'runs out early', cells.join(' | '));
    assert.match(cells[3], /^\$0\.0\d+$/, `the burn an hour: ${cells[3]}`);
    assert.match(cells[4], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+in \d/, `when it runs out: ${cells[4]}`);
    assert.match(cells[5], /10 % passed, 90 %/, `its warnings: ${cells[5]}`);
    const first = await ops.page.locator('tbody tr').first().innerText();
    assert.match(first, /forecast-demo/, 'the budget that runs out first stands first');
    await until('the warning and the forecast at the webhook', async () => alertsReceived.some((a) => a.kind === 'budget_warning' && /forecast-demo/.test(a.subject))
      && alertsReceived.some((a) => a.kind === 'budget_forecast' && /forecast-demo/.test(a.subject)));
    await until('the warnings sent on the page', async () => {
      await open(ops.page, 'budgets');
      const summary = await ops.page.locator('section[aria-label="Budgets now"]').innerText();
      return /Warnings sent \(budget_warning\)\s+[1-9]/.test(summary) && /Forecasts sent \(budget_forecast\)\s+[1-9]/.test(summary);
    });
    // Only those at risk: every row shown is spent, running out or warned.
    await open(ops.page, 'budgets?show=risk');
    const standings = await ops.page.locator('tbody tr td:nth-child(2)').allInnerTexts();
    assert.ok(standings.length >= 1 && standings.every((t) => t !== 'on track'), standings.join(', '));
    await ops.page.screenshot({ path: path.join(artifacts, 'budgets-forecast.png'), fullPage: true });
    // Revoked: a revoked key's budget is no longer watched nor listed.
    assert.equal((await adminApi('DELETE', `keys/${forecast.body.id}`)).status, 200);
    await open(ops.page, 'budgets');
    assert.doesNotMatch(await ops.page.locator('#content').innerText(), /forecast-demo/);
  }

  step('reconciliation: the ledger against the provider\'s usage and cost reports, drift past the tolerance first');
  {
    const gpt = async () => (await adminApi('GET', 'reconciliation')).body.lines.find((l) => l.model === 'gpt-4o-mini' && l.ledger_tokens > 0);
    // A run a few seconds after boot, then each minute: one that read the
    // traffic after it settled (during it, rows land between the report
    // and the ledger's read) finds the report's 5 % more.
    await until('a run that read the settled traffic', async () => {
      const line = await gpt();
      if (line && line.over && line.drift > 0.02) return true;
      throw new Error(JSON.stringify(line));
    }, 150000);
    await open(ops.page, 'reconciliation');
    const row = ops.page.getByRole('table', { name: /Ledger against provider reports/ }).getByRole('row').filter({ hasText: 'gpt-4o-mini' });
    const cells = await row.locator('td').allInnerTexts();
    assert.equal(cells[1], 'openai');
    assert.match(cells[5], /^\+\d+\.\d\d % past$/, `the token drift, past the tolerance: ${cells[5]}`);
    const byProvider = await ops.page.getByRole('table', { name: /Ledger against provider, / }).innerText();
    assert.match(byProvider, /openai/);
    assert.match(await ops.page.getByRole('table', { name: 'Each provider\'s last run' }).innerText(), /openai[\s\S]*read/);
    await open(ops.page, 'reconciliation?over=1');
    const days = await ops.page.locator('tbody').last().locator('tr').count();
    assert.ok(days >= 1, 'the drift past the tolerance is listed');
    await ops.page.screenshot({ path: path.join(artifacts, 'reconciliation.png'), fullPage: true });
  }

  step('sockets and pins: an open Responses socket with its turn, and a pinned session');
  let socket;
  {
    const owner = await adminApi('POST', 'keys', { name: 'socket-owner', group: 'acme' });
    assert.equal(owner.status, 201);
    socket = await responsesSocket(dataPort, owner.body.key);
    socket.send(JSON.stringify({ type: 'response.create', model: 'demo', input: 'hello over a socket' }));
    await until('the turn to complete', async () => socket.text().includes('response.completed'));
    for (let i = 0; i < 2; i += 1) {
      const pinned = await fetch(`${data}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${owner.body.key}`, 'content-type': 'application/json', 'x-session-id': 'console-pinned-session' },
        body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'pin me' }], max_tokens: 8 }),
      });
      assert.equal(pinned.status, 200);
    }
    await open(ops.page, 'sessions');
    const socketRow = await ops.page.getByRole('table', { name: 'Sockets open on this instance, oldest first' }).getByRole('row').filter({ hasText: 'socket-owner' }).locator('td').allInnerTexts();
    assert.deepEqual([socketRow[1], socketRow[2], socketRow[3], socketRow[6]], ['responses', 'socket-owner', 'acme', '1'], socketRow.join(' | '));
    assert.match(await ops.page.locator('section[aria-label="Open now"]').innerText(), /Sockets open\s+1 of/);
    const pin = await ops.page.getByRole('table', { name: 'Sessions pinned in demo, most moved first' }).getByRole('row').filter({ hasText: 'console-pinned-session' }).locator('td').allInnerTexts();
    assert.match(pin[1], /^demo-(openai|anthropic)$/, pin.join(' | '));
    await ops.page.screenshot({ path: path.join(artifacts, 'sessions.png'), fullPage: true });
  }

  step('runs: a run past its call cap is listed limited, and the Kill button stops another at once');
  {
    const agent = await adminApi('POST', 'keys', { name: 'run-agent', group: 'agents' });
    assert.equal(agent.status, 201);
    const turn = (run) => fetch(`${data}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent.body.key}`, 'content-type': 'application/json', 'x-switchyard-run': run },
      body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'one agent turn' }], max_tokens: 8 }),
    });
    for (let i = 0; i < 2; i += 1) assert.equal((await turn('console-capped')).status, 200);
    const capped = await turn('console-capped');
    assert.equal(capped.status, 429);
    assert.match((await capped.json()).error.message, /run `console-capped` is stopped: it reached its `calls` limit/);
    assert.equal((await turn('console-live')).status, 200);
    await open(ops.page, 'runs');
    const cappedRow = await ops.page.getByRole('row').filter({ hasText: 'console-capped' }).locator('td').allInnerTexts();
    assert.equal(cappedRow[3], 'limited(calls)', cappedRow.join(' | '));
    assert.match(cappedRow[5], /2 calls, 0 tool calls\s+2 of 2 calls/, cappedRow.join(' | '));
    ops.dialogs.length = 0;
    await ops.page.getByRole('button', { name: `Kill run console-live of key ${agent.body.id}` }).click();
    await until('the run killed on the page', async () => {
      const cells = await ops.page.getByRole('row').filter({ hasText: 'console-live' }).locator('td').allInnerTexts();
      return cells[3] === 'killed';
    });
    assert.match(ops.dialogs.join('\n'), /Kill run console-live/, 'Kill asks first');
    const refused = await turn('console-live');
    assert.equal(refused.status, 429);
    assert.match((await refused.json()).error.message, /run `console-live` is stopped: an operator killed it/);
    await ops.page.screenshot({ path: path.join(artifacts, 'runs.png'), fullPage: true });
  }

  step(`every page loads in under ${PAGE_BUDGET_MS} ms with ${LEDGER_ROWS} ledger rows, passes axe-core, and is saved`);
  const timings = {};
  await ops.page.setViewportSize({ width: 1440, height: 900 });
  {
    // A tripped lane's actions wrap in their cell: its weight stays in the table at 1440 px.
    for (let i = 0; i < 20; i += 1) await chat(bulk.body.key, 'flaky');
    await until('the broken lane tripped', async () => {
      await open(ops.page, 'pools');
      return (await ops.page.getByRole('button', { name: /Reset breaker of broken-openai/ }).count()) === 1;
    });
    const actionsCut = () => ops.page.locator('td .actions button, td .actions input').evaluateAll((nodes) => nodes.filter((node) => {
      const box = node.getBoundingClientRect();
      const scroller = node.closest('.scroll').getBoundingClientRect();
      return box.right > scroller.right + 1 || box.left < scroller.left - 1;
    }).map((node) => `${node.getAttribute('aria-label') || node.textContent} ${JSON.stringify(node.getBoundingClientRect())} in ${JSON.stringify(node.closest('.scroll').getBoundingClientRect())}`));
    // Read again if a redraw came between (a live page redraws every 5 s).
    let cut = await actionsCut();
    if (cut.length) cut = await actionsCut();
    assert.deepEqual(cut, [], 'pool actions cut at 1440 px');
    await ops.page.getByRole('button', { name: /Reset breaker of broken-openai/ }).click();
  }
  {
    // Keys sort by budget left (spent and held), and filter to those near it.
    assert.equal((await adminApi('POST', 'keys', { name: 'spent-out', budget: { usd: 0, window: '1d' } })).status, 201);
    await open(ops.page, 'keys?sort=headroom');
    const names = await ops.page.locator('tbody tr .key-name strong').allTextContents();
    assert.equal(names[0], 'spent-out', `least budget left first: ${names}`);
    await open(ops.page, 'keys?near=yes');
    assert.deepEqual(await ops.page.locator('tbody tr .key-name strong').allTextContents(), ['spent-out'], 'only the keys near their budget');
  }
  {
    // The keys table's actions are whole at 1440 px.
    await open(ops.page, 'keys');
    const clipped = await ops.page.locator('td .actions button, td .actions summary').evaluateAll((nodes) => nodes.filter((node) => {
      const box = node.getBoundingClientRect();
      const scroller = node.closest('.scroll').getBoundingClientRect();
      return node.scrollWidth > node.clientWidth + 1 || box.right > scroller.right + 1;
    }).map((node) => node.textContent));
    assert.deepEqual(clipped, [], 'actions cut at 1440 px');
    // A key's edit form, open, lies whole inside the table's box.
    await ops.page.locator('summary[aria-label="Edit bulk-traffic"]').click();
    const form = await ops.page.locator('form[aria-label="Settings of bulk-traffic"]').evaluate((node) => {
      const box = node.getBoundingClientRect();
      // Whole on screen, and what is drawn at its corners is the form itself (nothing clips it).
      const inside = [[box.left + 4, box.top + 4], [box.right - 4, box.top + 4], [box.left + 4, Math.min(box.bottom, innerHeight) - 4], [box.right - 4, Math.min(box.bottom, innerHeight) - 4]]
        .every(([x, y]) => node.contains(document.elementFromPoint(x, y)));
      return { left: box.left, right: innerWidth - box.right, width: box.width, inside };
    });
    assert.ok(form.left >= 0 && form.right >= 0 && form.width >= 260 && form.inside, `the edit form is clipped at 1440 px: ${JSON.stringify(form)}`);
    await ops.page.keyboard.press('Escape');
    assert.equal(await ops.page.locator('form[aria-label="Settings of bulk-traffic"]').isVisible(), false, 'Escape closes the edit panel');
    const names = await ops.page.locator('td .key-name').evaluateAll((nodes) => nodes.map((node) => node.getBoundingClientRect().width));
    assert.ok(Math.min(...names) >= 100, `key names crushed to ${Math.min(...names)} px`);
  }
  {
    // Issue 52, second pass: what was still missing when the console was
    // walked again with traffic behind it.
    step('a key refused for a quota is no green bar; its suspension shows its end and is lifted, audited');
    const quotaKey = await adminApi('POST', 'keys', { name: 'quota-out', budget: { usd: 100, window: '1d' }, limits: { rpd: 1 } });
    assert.equal(quotaKey.status, 201);
    assert.equal((await chat(quotaKey.body.key, 'demo')).status, 200);
    assert.equal((await chat(quotaKey.body.key, 'demo')).status, 429, 'the day\'s one request is spent');
    await open(ops.page, 'keys?q=quota-out');
    const quotaRow = ops.page.getByRole('row').filter({ hasText: 'quota-out' });
    assert.match(await quotaRow.innerText(), /refused: its own rpd quota is used up/);
    const bar = await quotaRow.locator('meter').first().evaluate((m) => ({ value: m.value, low: m.low, high: m.high, optimum: m.optimum }));
    // The meter's region: the optimum (green) is below `low`; past `high` it is the worst (red).
    assert.ok(bar.value < 0.01 && bar.value >= bar.high && bar.high <= bar.low, `a refused key's bar is drawn green: ${JSON.stringify(bar)}`);
    await open(ops.page, 'keys?near=yes');
    assert.ok((await ops.page.locator('tbody tr .key-name strong').allTextContents()).includes('quota-out'), 'a refused key is near its budget');
    await open(ops.page, 'keys?sort=headroom');
    assert.equal((await ops.page.locator('tbody tr .key-name strong').allTextContents())[0], 'quota-out', 'a refused key has the least headroom');
    // A key refused again and again for its own conduct (its rate limit) is
    // suspended (governance.suspend), with its end shown, and lifted here.
    const fastKey = await adminApi('POST', 'keys', { name: 'too-fast', limits: { rpm: 1 } });
    for (let i = 0; i < 5; i += 1) await chat(fastKey.body.key, 'demo');
    await until('the key suspended', async () => (await adminApi('GET', `keys/${fastKey.body.id}`)).body.state === 'suspended');
    await open(ops.page, 'keys?q=too-fast');
    assert.match(await ops.page.getByRole('row').filter({ hasText: 'too-fast' }).innerText(), /suspended\s+until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    await ops.page.getByRole('button', { name: 'Lift the suspension of too-fast' }).click();
    await until('the suspension lifted', async () => (await adminApi('GET', `keys/${fastKey.body.id}`)).body.state !== 'suspended');

    step('the audit log says what changed, before and after, in words');
    await open(ops.page, 'alerts');
    const auditTable = ops.page.getByRole('table', { name: 'Admin changes and attempts, newest first' });
    const auditText = await auditTable.innerText();
    assert.match(auditText, /Lifted a key's suspension[\s\S]*suspended until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC → not suspended/);
    assert.match(auditText, /Changed a key[\s\S]*limits\.rpm: (none|\d+) → 100000/, 'the key edit above, its rpm before and after');
    assert.match(auditText, /Changed a lane[\s\S]*weight: 3 → 5/, 'the weight set on the pools page');
    assert.doesNotMatch(auditText, /\b(PATCH|DELETE|POST) \/api\/v1\//, 'no raw HTTP lines');
    for (const secret of [FULL, READ, PROVIDER_KEY]) assert.ok(!auditText.includes(secret), 'no secret in the audit log');

    step('request detail: each failed attempt keeps what its upstream said');
    const overloaded = await fetch(`${data}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bulk.body.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: '[mock:status=503] every lane is overloaded' }], max_tokens: 16 }),
    });
    assert.equal(overloaded.status, 503, await overloaded.text());
    let allFailed;
    await until('the failed request in the log', async () => {
      allFailed = (await adminApi('GET', 'requests?pool=demo&status=503&limit=1')).body.data[0];
      return allFailed;
    });
    await open(ops.page, `requests?id=${allFailed.id}`);
    const toldAll = await ops.page.locator('#content').innerText();
    assert.match(toldAll, /Every attempt failed \(2 tried: demo-\w+ upstream error 503, demo-\w+ upstream error 503\); no lane answered/);
    assert.match(toldAll, /Lane that answered\s+none/);
    assert.match(toldAll, /The last upstream said: .+/);
    const said = await ops.page.getByRole('table', { name: 'Upstream attempts in order' }).locator('code.said').allTextContents();
    assert.equal(said.length, 2, `each failed attempt keeps its upstream's error: ${said}`);
    for (const text of said) assert.ok(text.length > 0 && text.length <= 300, `bounded: ${text.length}`);
    assert.ok(!toldAll.includes(PROVIDER_KEY), 'no provider key in a request\'s detail');
    const refusedLane = (await adminApi('GET', 'requests?pool=broken-openai&limit=1')).body.data[0];
    await open(ops.page, `requests?id=${refusedLane.id}`);
    assert.match(await ops.page.getByRole('table', { name: 'Upstream attempts in order' }).innerText(), /broken-openai[\s\S]*unreachable[\s\S]*connection refused/i);

    step('alerts: human times, silenced for a while (audited), the silence ended');
    // spent-out's budget of $0 keeps its threshold alert open (a breaker's
    // comes and goes as its lane is tried again).
    await until('the budget alert open', async () => {
      await open(ops.page, 'alerts');
      return /budget threshold[^\n]*spent-out/.test(await ops.page.getByRole('table', { name: 'Alerts firing now' }).innerText());
    });
    const firing = ops.page.getByRole('table', { name: 'Alerts firing now' }).getByRole('row').filter({ hasText: 'budget threshold' }).filter({ hasText: 'spent-out' });
    assert.match(await firing.innerText(), /(just now|\d+ min ago) \(\d\d:\d\d UTC\)/, 'when, in words');
    {
      const raw = (await ops.page.locator('#content').innerText()).match(/.*(Unix time|\b1[6-9]\d{8}(\d{3})?\b).*/);
      assert.equal(raw, null, `a raw Unix time: ${raw && raw[0]}`);
    }
    await firing.getByRole('combobox').selectOption('1h');
    await firing.getByRole('button', { name: /^Silence / }).click();
    await until('the silence shown', async () => /until \d\d:\d\d UTC \(by ops\)/.test(await firing.innerText()));
    const listed = (await adminApi('GET', 'alerts')).body.open.find((a) => a.kind === 'budget_threshold' && /spent-out/.test(a.subject));
    assert.ok(listed.silenced_until > Date.now() + 55 * 60000 && listed.silenced_by === 'ops', JSON.stringify(listed));
    await until('the silence in the audit log', async () => /Silenced an alert[\s\S]*not silenced → silenced until/.test(await auditTable.innerText()));
    await firing.getByRole('button', { name: /^Unsilence / }).click();
    await until('the silence ended', async () => !(await adminApi('GET', 'alerts')).body.open.some((a) => a.silenced_until));
    await until('the silence\'s end in the audit log', async () => {
      await open(ops.page, 'alerts');
      return /Ended an alert's silence[\s\S]*silenced until .* by ops → not silenced/.test(await auditTable.innerText());
    });
  }
  // The gateway's CPU time so far (every thread), in ms, from Linux's
  // per-thread scheduler counters (nanoseconds).
  const gatewayCpuMs = () => readdirSync(`/proc/${gateway.pid}/task`).reduce((sum, task) => {
    try {
      return sum + Number(readFileSync(`/proc/${gateway.pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
    } catch {
      return sum; // a thread that ended meanwhile
    }
  }, 0);
  const refreshCpu = {};
  for (const name of PAGES) {
    await open(ops.page, name); // warm: the first visit after a reload
    const samples = [];
    const cpuBefore = gatewayCpuMs();
    for (let i = 0; i < 5; i += 1) samples.push(await open(ops.page, name));
    // What one visit's API calls (and the document) cost the gateway.
    refreshCpu[name || 'overview'] = Math.round(((gatewayCpuMs() - cpuBefore) / 5) * 10) / 10;
    samples.sort((a, b) => a - b);
    timings[name || 'overview'] = Math.round(samples[2]);
    assert.ok(samples[2] < PAGE_BUDGET_MS, `/ui/${name}: median of ${samples.map(Math.round).join(", ")} ms`);
    assert.ok(refreshCpu[name || 'overview'] < REFRESH_CPU_MS, `/ui/${name}: one visit costs the gateway ${refreshCpu[name || 'overview']} ms of CPU`);
    await ops.page.evaluate(axeSource);
    const result = await ops.page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
    const violations = result.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
    assert.deepEqual(violations, [], `axe-core on /ui/${name}`);
    await ops.page.screenshot({ path: path.join(artifacts, `page-${name || 'overview'}.png`), fullPage: true });
    assert.match(await ops.page.title(), / · Switchyard$/);
  }
  for (const size of SIZES) {
    await ops.page.setViewportSize({ width: size.width, height: size.height });
    for (const name of PAGES) {
      await open(ops.page, name);
      const wide = await ops.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(wide <= 0, `/ui/${name} at ${size.width} px is ${wide} px wider than the screen`);
      await ops.page.evaluate(axeSource);
      // WCAG 2.2's target size too (axe leaves it off by default).
      const result = await ops.page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'], rules: { 'target-size': { enabled: true } } }));
      const violations = result.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
      assert.deepEqual(violations, [], `axe-core on /ui/${name} at ${size.width} px`);
      if (size.width < 500) {
        // Chart text as drawn: its size times the drawing's scale.
        const smallest = await ops.page.evaluate(() => Math.min(...Array.from(document.querySelectorAll('svg.chart text'), (text) => {
          const svg = text.ownerSVGElement;
          const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
          return parseFloat(getComputedStyle(text).fontSize) * scale;
        })));
        assert.ok(smallest >= 11, `/ui/${name}: chart text drawn at ${smallest.toFixed(1)} px at ${size.width} px`);
        const header = await ops.page.locator('header.top').evaluate((node) => node.getBoundingClientRect().height);
        assert.ok(header <= 100, `/ui/${name}: the header takes ${header} px at ${size.width} px`);
      }
      await ops.page.screenshot({ path: path.join(artifacts, `page-${name || 'overview'}-${size.name}.png`), fullPage: true });
    }
  }
  {
    // The focus ring stands out (3:1 at least) against the cards and the
    // page, in both schemes.
    const luminance = (hex) => {
      const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255)
        .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const contrast = (a, b) => {
      const [x, y] = [luminance(a), luminance(b)].sort((m, n) => n - m);
      return (x + 0.05) / (y + 0.05);
    };
    for (const scheme of ['light', 'dark']) {
      await ops.page.emulateMedia({ colorScheme: scheme });
      const [ring, paper, wash] = await ops.page.evaluate(() => ['--focus', '--paper', '--wash']
        .map((name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim()));
      for (const ground of [paper, wash]) {
        assert.ok(contrast(ring, ground) >= 3, `the focus ring ${ring} is ${contrast(ring, ground).toFixed(1)}:1 on ${ground} (${scheme})`);
      }
    }
    await ops.page.emulateMedia({ colorScheme: 'light' });
  }
  {
    // Dark mode follows the system, and stays readable.
    await ops.page.emulateMedia({ colorScheme: 'dark' });
    await ops.page.setViewportSize({ width: 1440, height: 900 });
    for (const name of PAGES) {
      await open(ops.page, name);
      await ops.page.evaluate(axeSource);
      const result = await ops.page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
      const violations = result.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
      assert.deepEqual(violations, [], `axe-core on /ui/${name} in dark mode`);
      await ops.page.screenshot({ path: path.join(artifacts, `page-${name || 'overview'}-dark.png`), fullPage: true });
    }
    assert.notEqual(await ops.page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor), 'rgb(243, 245, 247)');
    await ops.page.emulateMedia({ colorScheme: 'light' });
  }
  console.log(`   median load, navigation start to data drawn (ms): ${JSON.stringify(timings)}`);
  console.log(`   gateway CPU per visit (ms): ${JSON.stringify(refreshCpu)}`);
  writeFileSync(path.join(artifacts, 'page-load-ms.json'), `${JSON.stringify({ ledger_rows: LEDGER_ROWS, median_ms: timings, gateway_cpu_ms_per_visit: refreshCpu }, null, 2)}\n`);
  assert.deepEqual(ops.errors, [], 'no script errors on any page');

  socket.close();

  step('a read-only token sees everything and changes nothing');
  for (let i = 0; i < 20; i += 1) await chat(bulk.body.key, 'flaky');
  const viewer = await signIn(READ);
  assert.match(await viewer.page.locator('#who').textContent(), /viewer \(read-only\)/);
  await open(viewer.page, 'pools');
  const reset = viewer.page.getByRole('button', { name: /Reset breaker of broken-openai/ });
  await until('the broken lane to open again', async () => {
    await open(viewer.page, 'pools');
    return (await reset.count()) === 1;
  });
  assert.ok(await reset.isDisabled(), 'reset is disabled for a read-only token');
  await open(viewer.page, 'keys');
  assert.ok(await viewer.page.getByRole('button', { name: /Rotate bulk-traffic/ }).isDisabled());
  for (const name of PAGES) {
    // No form it could not send: only the filters (GET forms) stay.
    await open(viewer.page, name);
    const editable = await viewer.page.locator('#content form:not([method="get"]), #content textarea, #content details.edit').count();
    assert.equal(editable, 0, `/ui/${name} shows a read-only token ${editable} editable forms`);
  }
  await open(viewer.page, 'keys');
  assert.match(await viewer.page.locator('.read-only').textContent(), /read-only/);
  await open(viewer.page, 'alerts');
  assert.match(await viewer.page.getByRole('table', { name: 'Alerts firing now' }).innerText(), /spent-out/);
  assert.equal(await viewer.page.getByRole('button', { name: /Silence/ }).count(), 0, 'a read-only token is offered no silence');
  const attempts = await viewer.page.evaluate(async () => {
    const { csrf } = JSON.parse(document.querySelector('meta[name="switchyard-session"]').content);
    const send = async (method, url, body) => (await fetch(url, {
      method, headers: { 'x-csrf-token': csrf, 'content-type': 'application/json' }, body,
    })).status;
    return [
      await send('POST', '/api/v1/admin/keys', JSON.stringify({ name: 'nope' })),
      await send('POST', '/api/v1/admin/lanes/flaky/broken-openai/reset'),
      await send('POST', '/api/v1/admin/config/reload'),
    ];
  });
  assert.deepEqual(attempts, [403, 403, 403]);
  await viewer.page.screenshot({ path: path.join(artifacts, 'read-only-keys.png'), fullPage: true });
  const audit = await adminApi('GET', 'audit?limit=50');
  assert.ok(audit.body.data.some((e) => e.actor === 'viewer' && e.outcome === 403), 'refused attempts are audited');

  step('a member signs in through single sign-on, mints a key and uses it from the OpenAI SDK');
  {
    const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (err) => errors.push(String(err)));
    page.on('dialog', (dialog) => dialog.accept());
    await page.goto(`${admin}/ui/login`);
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
    await page.waitForURL(`${admin}/ui/my-keys`);
    await page.waitForSelector('body[data-ready="true"]');
    assert.match(await page.locator('#who').textContent(), /lee@acme\.example \(member\)/);
    assert.equal(await page.locator('nav a').count(), 1, 'a member sees their own keys and nothing else');
    await page.getByLabel('Name').fill('member-laptop');
    await page.getByRole('button', { name: 'Mint key' }).click();
    await page.locator('#secret').waitFor();
    const memberSecret = (await page.locator('#secret').textContent()).trim();
    const memberClient = new OpenAI({ apiKey: memberSecret, baseURL: `${data}/v1`, maxRetries: 0 });
    const reply = await memberClient.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'hello from a member' }], max_tokens: 16 });
    assert.ok(reply.choices[0].message.content);
    assert.match(await page.getByRole('table').innerText(), /member-laptop/);
    await page.screenshot({ path: path.join(artifacts, 'member-keys.png'), fullPage: true });
    // The operators' pages are not a member's: sent back to their keys.
    await page.goto(`${admin}/ui/keys`);
    await page.waitForURL(`${admin}/ui/my-keys`);
    // The operators see the member's key in the member's own group.
    const keysNow = await adminApi('GET', 'keys?limit=1000');
    const theirs = keysNow.body.data.find((k) => k.name === 'member-laptop');
    assert.match(theirs.group, /^people-member-1-/);
    assert.deepEqual(errors, [], 'no script errors on the member page');
    await context.close();
  }

  step('a tenant admin of acme sees its subtree alone: none of globex\'s keys, groups or spend');
  {
    const globex = await adminApi('POST', 'keys', { name: 'globex-payroll', group: 'globex', budget: { usd: 9, window: '1d' } });
    assert.equal(globex.status, 201);
    assert.equal((await chat(globex.body.key, 'demo')).status, 200);
    await until('globex\'s spend in the ledger', async () => (await adminApi('GET', 'spend?by=group&from=0')).body.data
      .some((line) => line.value === 'globex' && line.usd > 0));
    const acme = await signIn(TENANT);
    assert.match(await acme.page.locator('#who').textContent(), /acme-lead \(full access, group acme\)/);
    const nav = await acme.page.locator('nav a').allTextContents();
    for (const hidden of ['Pools & lanes', 'MCP', 'Playground', 'Config', 'Reconciliation', 'Sockets & pins']) {
      assert.ok(!nav.includes(hidden), `a tenant admin is not offered ${hidden}: ${nav}`);
    }
    const seen = {};
    for (const name of ['', 'keys', 'groups', 'budgets', 'spend', 'spend?by=group', 'spend?by=key', 'usage', 'requests', 'alerts']) {
      await open(acme.page, name);
      seen[name] = await acme.page.locator('#content').innerText();
      assert.doesNotMatch(seen[name], /globex/i, `/ui/${name} shows globex's:\n${seen[name]}`);
      await acme.page.screenshot({ path: path.join(artifacts, `tenant-${name.replace(/\W+/g, '-') || 'overview'}.png`), fullPage: true });
    }
    // Its own subtree is there: acme's groups and the key traffic came from.
    assert.match(seen.groups, /acme-research/);
    assert.doesNotMatch(seen.groups, /people/, 'nor another group beside acme');
    assert.match(seen.keys, /bulk-traffic/);
    assert.match(seen['spend?by=group'], /acme/);
    // Its budgets: acme's subtree's, with their forecasts.
    assert.match(seen.budgets, /group acme-research/);
    assert.match(seen.budgets, /group acme\b/);
    assert.doesNotMatch(seen.budgets, /people|spent-out/, 'no budget outside acme');
    // Its own group is shown, not offered to change (its budget and place are the operator's).
    await open(acme.page, 'groups');
    assert.equal(await acme.page.locator('summary[aria-label="Edit acme"], button[aria-label="Delete acme"]').count(), 0, 'acme itself has no edit or delete');
    // Its keys are its to change: the create form and each key's actions are there.
    await open(acme.page, 'keys');
    assert.equal(await acme.page.getByRole('form', { name: 'Create a key' }).count(), 1, 'a tenant admin creates keys under acme');
    assert.equal(await acme.page.getByRole('button', { name: 'Revoke bulk-traffic' }).count(), 1);
    // The scoped view at a laptop's and a phone's width: nothing wider than
    // the screen, axe-core clean (target size too).
    for (const size of SIZES) {
      await acme.page.setViewportSize({ width: size.width, height: size.height });
      for (const name of ['', 'keys', 'groups', 'budgets', 'spend', 'usage', 'requests', 'alerts']) {
        await open(acme.page, name);
        const wide = await acme.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(wide <= 0, `a tenant's /ui/${name} at ${size.width} px is ${wide} px wider than the screen`);
        await acme.page.evaluate(axeSource);
        const result = await acme.page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'], rules: { 'target-size': { enabled: true } } }));
        const violations = result.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
        assert.deepEqual(violations, [], `axe-core on a tenant's /ui/${name} at ${size.width} px`);
        await acme.page.screenshot({ path: path.join(artifacts, `tenant-${name || 'overview'}-${size.name}.png`), fullPage: true });
      }
    }
    // What only the gateway's admin does is not offered: its page sends the tenant back.
    for (const page of ['config', 'reconciliation', 'sessions']) {
      await acme.page.goto(`${admin}/ui/${page}`);
      await acme.page.waitForURL(`${admin}/ui/`);
    }
    assert.deepEqual(acme.errors, [], 'no script errors on a tenant admin\'s pages');
    // Asked by hand from the page, globex's key is not there.
    const status = await acme.page.evaluate(async (id) => (await fetch(`/api/v1/admin/keys/${id}`)).status, globex.body.id);
    assert.equal(status, 404);
    await acme.context.close();
  }

  step('the webhook heard one resolved per firing it was sent, for every alert');
  {
    const told = new Map();
    for (const alert of alertsReceived) {
      const key = `${alert.kind} ${alert.subject}`;
      const seen = told.get(key) || { firing: 0, resolved: 0 };
      seen[alert.state] += 1;
      told.set(key, seen);
    }
    for (const [key, seen] of told) assert.ok(seen.resolved <= seen.firing, `${key}: ${JSON.stringify(seen)}`);
  }

  step('a gateway without an alerts webhook still shows its alerts');
  {
    const [lonelyData, lonelyAdmin] = [await freePort(), await freePort()];
    const lonelyDir = mkdtempSync(path.join(tmpdir(), 'switchyard-console-lonely-'));
    writeFileSync(path.join(lonelyDir, 'switchyard.yaml'), `listen: 127.0.0.1:${lonelyData}
admin_listen: 127.0.0.1:${lonelyAdmin}
admin: { tokens: [{ name: ops, token: ${FULL}, scope: full }] }
providers:
  refusing: { protocol: openai, base_url: "http://127.0.0.1:${refusedPort}" }
models:
  broken: { provider: refusing, model: gpt-4o-mini }
pools:
  lonely: { members: [{ model: broken }] }
`);
    const lonely = spawn(bin, ['--config', path.join(lonelyDir, 'switchyard.yaml')], { stdio: 'ignore', env: { ...process.env, SWITCHYARD_LOG: 'warn' } });
    try {
      await until('the second admin listener', async () => (await fetch(`http://127.0.0.1:${lonelyAdmin}/healthz`)).ok);
      for (let i = 0; i < 10; i += 1) {
        await fetch(`http://127.0.0.1:${lonelyData}/v1/chat/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'lonely', messages: [{ role: 'user', content: 'hello' }] }),
        });
      }
      const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
      const page = await context.newPage();
      await page.goto(`http://127.0.0.1:${lonelyAdmin}/ui/login`);
      await page.getByLabel('Admin token').fill(FULL);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForSelector('body[data-ready="true"]');
      await until('the alert listed without a webhook', async () => {
        await page.goto(`http://127.0.0.1:${lonelyAdmin}/ui/alerts`);
        await page.waitForSelector('body[data-ready="true"]');
        return /breaker opened[\s\S]*broken/.test(await page.getByRole('table', { name: 'Alerts firing now' }).innerText());
      });
      assert.match(await page.locator('#content').innerText(), /listed here and sent nowhere/);
      await page.goto(`http://127.0.0.1:${lonelyAdmin}/ui/`);
      await page.waitForSelector('body[data-ready="true"]');
      assert.match(await page.locator('section[aria-label="Open alerts"]').innerText(), /breaker opened/);
      assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth), 'the overview fits 390 px');
      await page.screenshot({ path: path.join(artifacts, 'alerts-without-webhook.png'), fullPage: true });
      await context.close();
    } finally {
      lonely.kill('SIGTERM');
      rmSync(lonelyDir, { recursive: true, force: true });
    }
  }

  step('sign out ends the session');
  await viewer.page.getByRole('button', { name: 'Sign out' }).click();
  await viewer.page.waitForURL(/\/ui\/login/);
  const after = await viewer.page.evaluate(async () => (await fetch('/api/v1/admin/keys')).status);
  assert.equal(after, 401);
  console.log(`console tests passed; screenshots in ${path.relative(root, artifacts) || artifacts}`);
} catch (err) {
  failed = true;
  console.error(err);
  console.error(`--- gateway log (last 3000 bytes)\n${gatewayLog.slice(-3000)}`);
} finally {
  if (browser) await browser.close();
  gateway.kill('SIGTERM');
  await sleep(300);
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
