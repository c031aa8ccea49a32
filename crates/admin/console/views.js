// Switchyard console: the views of what wave 4 added. Budgets with their
// forecasts and warnings, reconciliation drift against the providers'
// reports, the long-lived sockets and session pins open now, and agent
// runs with their kill switch. Drawn
// with app.js's helpers (window.switchyardConsole), as DOM nodes only.
'use strict';

(() => {
  const c = window.switchyardConsole;
  if (!c) return;
  const { h, api, show, say, table, field, meter, fmt, isoDate, button, canChange, readOnly } = c;
  const session = () => c.session();

  // A wait in words: "3 h 5 m", "40 s".
  function span(ms) {
    if (ms === null || ms === undefined) return '–';
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return `${s} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} m ${s % 60} s`;
    const hours = Math.floor(m / 60);
    if (hours < 48) return `${hours} h ${m % 60} m`;
    return `${Math.floor(hours / 24)} d ${hours % 24} h`;
  }

  const badge = (cls, text) => h('span', { class: `badge ${cls}`, text });
  const tile = (name, value) => h('div', { class: 'tile' }, h('dt', { text: name }), h('dd', { text: value }));
  const tiles = (label, items) => h('section', { class: 'window views-summary', 'aria-label': label }, h('h2', { text: label }),
    h('dl', { class: 'tiles' }, items.map(([name, value]) => tile(name, value))));
  const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(2)} %`;

  // ------------------------------------------------------------ budgets --

  // A budget's standing, worst first: spent, forecast to run out before its
  // window ends, past one of its warnings, fine.
  const STANDING = { spent: 0, 'runs-out': 1, warned: 2, ok: 3 };
  const STANDING_TEXT = { spent: 'spent', 'runs-out': 'runs out early', warned: 'past a warning', ok: 'on track' };

  function standing(b) {
    const share = b.cap_usd > 0 ? b.spent_usd / b.cap_usd : 0;
    const passed = (b.warn || []).filter((w) => share * 100 >= w);
    let state = 'ok';
    if (share >= 1) state = 'spent';
    else if (b.exhausts_at) state = 'runs-out';
    else if (passed.length) state = 'warned';
    return { share, passed, state };
  }

  function whose(b) {
    const [kind, ...rest] = b.bucket.split(':');
    const id = rest.join(':');
    const quoted = b.who.match(/`([^`]*)`/);
    const name = quoted ? quoted[1] : id;
    if (kind === 'key') return h('a', { href: `/ui/keys?id=${encodeURIComponent(id)}`, text: `key ${name}` });
    return h('a', { href: '/ui/groups', text: `group ${name}` });
  }

  async function budgetsPage() {
    if (!session().governance) return show(h('p', { class: 'note', text: 'Governance is off: no key or group has a budget.' }));
    const params = new URLSearchParams(location.search);
    const only = params.get('show') === 'risk';
    const [budgets, alerts] = await Promise.all([api('budgets'), api('alerts')]);
    const now = Date.now();
    const rows = budgets.data.map((b) => ({ b, ...standing(b) }))
      .sort((x, y) => STANDING[x.state] - STANDING[y.state]
        || (x.b.exhausts_at || Infinity) - (y.b.exhausts_at || Infinity)
        || y.share - x.share
        || x.b.bucket.localeCompare(y.b.bucket));
    const count = (state) => rows.filter((r) => r.state === state).length;
    const shown = only ? rows.filter((r) => r.state !== 'ok') : rows;
    const sent = (kind) => (alerts.counts || []).find((k) => k.kind === kind);
    const warningsSent = sent('budget_warning');
    const forecastsSent = sent('budget_forecast');
    const form = h('form', { class: 'card filters', method: 'get', action: '/ui/budgets', 'aria-label': 'Which budgets' },
      field('Show', h('select', { name: 'show' }, [['', 'every budget'], ['risk', 'spent, running out or past a warning']]
        .map(([value, text]) => h('option', { value, text, selected: (value === 'risk') === only })))),
      h('button', { type: 'submit', text: 'Show' }));
    show(
      tiles('Budgets now', [
        ['Budgets', fmt.n(rows.length)],
        ['Spent', fmt.n(count('spent'))],
        ['Run out before their window ends', fmt.n(count('runs-out'))],
        ['Past a warning', fmt.n(count('warned'))],
      ].concat(warningsSent ? [['Warnings sent (budget_warning)', fmt.n(warningsSent.sent)], ['Forecasts sent (budget_forecast)', fmt.n(forecastsSent ? forecastsSent.sent : 0)]] : [])),
      alerts.configured ? null
        : h('p', { class: 'note', text: 'No alerts receiver: warnings and forecasts show here but are sent nowhere (set alerts.webhook).' }),
      h('p', { class: 'muted views-explain', text: 'The burn is the spend of the last hour; a budget that runs out at that pace before its window ends is forecast. The warnings are each budget\'s own warn shares (budget.warn); each one passed is told once a window.' }),
      form,
      table(only ? 'Budgets spent, running out or past a warning, worst first' : 'Every budget, worst first',
        ['Budget', 'Standing', 'Spent this window', 'Burn an hour', 'Runs out (UTC)', 'Warnings', 'Window ends (UTC)'],
        shown.map(({ b, passed, state }) => [
          whose(b),
          badge(`standing ${state}`, STANDING_TEXT[state]),
          meter(b.spent_usd, b.cap_usd, `${b.who} budget used`),
          b.burn_usd_per_hour === null || b.burn_usd_per_hour === undefined ? 'not watched yet' : fmt.usd(b.burn_usd_per_hour),
          b.exhausts_at
            ? h('span', {}, fmt.time(b.exhausts_at * 1000), h('br'), h('span', { class: 'muted', text: `in ${b.runs_out_in || span(b.exhausts_at * 1000 - now)}` }))
            : (state === 'spent' ? 'spent' : 'lasts its window'),
          (b.warn || []).length
            ? h('span', {}, b.warn.flatMap((w, i) => [i ? ', ' : '', passed.includes(w) ? h('strong', { text: `${w} % passed` }) : `${w} %`]))
            : h('span', { class: 'muted', text: 'the alerts\' thresholds' }),
          b.window_ends_at ? `${fmt.time(b.window_ends_at * 1000)} (${b.window})` : (b.window || 'total'),
        ]),
        only ? 'No budget is spent, running out or past a warning.' : 'No key or group has a budget.'));
  }

  // ----------------------------------------------------- reconciliation --

  async function reconciliationPage() {
    const params = new URLSearchParams(location.search);
    const day = (text) => (/^\d{4}-\d{2}-\d{2}$/.test(text || '') && !Number.isNaN(Date.parse(`${text}T00:00:00Z`)) ? text : null);
    const now = Date.now() / 1000;
    const from = day(params.get('from')) || isoDate(now - 6 * 86400);
    const to = day(params.get('to')) || isoDate(now);
    const over = params.get('over') === '1';
    const report = await api(`reconciliation?${new URLSearchParams({ from, to })}`);
    if (!report.configured) {
      return show(h('p', { class: 'note', text: 'Reconciliation is off: add reconcile: with a provider account\'s admin key (openai: { admin_key: ... } or anthropic: { admin_key: ... }) to compare the ledger with what the providers report and bill.' }));
    }
    const form = h('form', { class: 'card filters', method: 'get', action: '/ui/reconciliation', 'aria-label': 'Reconciliation range' },
      field('From', h('input', { type: 'date', name: 'from', value: from })),
      field('To', h('input', { type: 'date', name: 'to', value: to })),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'over', value: '1', checked: over }), 'Only drift past the tolerance'),
      h('button', { type: 'submit', text: 'Show' }));
    const past = (l) => l.over || l.cost_over;
    const lines = report.lines.filter((l) => !over || past(l))
      .sort((a, b) => Number(past(b)) - Number(past(a)) || b.day.localeCompare(a.day) || a.provider.localeCompare(b.provider) || a.model.localeCompare(b.model));
    // Per provider: both sides summed over the range.
    const providers = new Map();
    for (const l of report.lines) {
      const p = providers.get(l.provider) || { ledger: 0, reported: 0, ledgerUsd: 0, billedUsd: 0, billed: false, over: 0 };
      p.ledger += l.ledger_tokens; p.reported += l.reported_tokens; p.ledgerUsd += l.ledger_usd;
      if (l.provider_usd !== null && l.provider_usd !== undefined) { p.billedUsd += l.provider_usd; p.billed = true; }
      if (past(l)) p.over += 1;
      providers.set(l.provider, p);
    }
    const drift = (ledger, reported) => (ledger > 0 ? (reported - ledger) / ledger : null);
    const driftCell = (x, isOver) => (x === null || x === undefined ? '–'
      : h('span', { class: `drift ${isOver ? 'over' : 'within'}` }, isOver ? h('strong', { text: pct(x) }) : pct(x), isOver ? ' past' : ''));
    const tolerance = report.tolerance;
    show(
      h('p', { class: 'muted views-explain', text: `Each provider's own usage and cost reports against the ledger's tokens and their cost at the rate card, per model and UTC day, ${report.from} to ${report.to}. A drift past ${(tolerance * 100).toFixed(2)} % (reconcile.tolerance) alerts once (reconcile_drift).` }),
      form,
      h('h2', { text: 'By provider' }),
      table(`Ledger against provider, ${report.from} to ${report.to}`, ['Provider', 'Ledger tokens', 'Reported tokens', 'Token drift', 'Ledger cost', 'Billed', 'Cost drift', 'Days past the tolerance'],
        Array.from(providers, ([name, p]) => {
          const tokens = drift(p.ledger, p.reported);
          const cost = p.billed ? drift(p.ledgerUsd, p.billedUsd) : null;
          return [name, fmt.n(p.ledger), fmt.n(p.reported), driftCell(tokens, tokens !== null && Math.abs(tokens) > tolerance),
            fmt.usd(p.ledgerUsd), p.billed ? fmt.usd(p.billedUsd) : '–', driftCell(cost, cost !== null && Math.abs(cost) > tolerance), fmt.n(p.over)];
        }), 'No report read in this range yet.'),
      h('h2', { text: 'By provider, model and day' }),
      table(over ? 'Drift past the tolerance, newest day first' : 'Ledger against provider reports, drift past the tolerance first', ['Day (UTC)', 'Provider', 'Model', 'Ledger tokens', 'Reported tokens', 'Token drift', 'Ledger cost', 'Billed', 'Cost drift'],
        lines.map((l) => [l.day, l.provider, l.model, fmt.n(l.ledger_tokens), fmt.n(l.reported_tokens), driftCell(l.drift, l.over),
          fmt.usd(l.ledger_usd), l.provider_usd === null || l.provider_usd === undefined ? '–' : fmt.usd(l.provider_usd), driftCell(l.cost_drift, l.cost_over)]),
        over ? 'No drift past the tolerance in this range.' : 'No report read in this range yet.'),
      h('h2', { text: 'Runs' }),
      table('Each provider\'s last run', ['Provider', 'Last run (UTC)', 'Runs', 'Failed', 'Last error', 'Cost report', 'Cost rows left out'],
        report.runs.map((r) => {
          const skipped = r.skipped ? Object.entries(r.skipped).filter(([, n]) => n > 0) : [];
          return [r.provider, fmt.time(r.at), fmt.n(r.runs), fmt.n(r.failures), r.error || '–', r.cost_error || (r.error ? '–' : 'read'),
            skipped.length ? skipped.map(([why, n]) => `${fmt.n(n)} ${why}`).join(', ') : '–'];
        }), 'Not run yet: the first run starts a few seconds after the gateway does.'));
  }

  // ----------------------------------------------------------- sessions --

  async function sessionsPage() {
    const [sockets, pins] = await Promise.all([api('sockets'), api('sessions')]);
    const now = Date.now();
    const key = (s) => (s.key_id
      ? h('a', { href: `/ui/keys?id=${encodeURIComponent(s.key_id)}`, text: s.key_name || s.key_id })
      : h('span', { class: 'muted', text: 'no key' }));
    const pinned = pins.reduce((n, p) => n + p.pinned, 0);
    const moves = pins.reduce((n, p) => n + p.moves, 0);
    show(
      tiles('Open now', [
        ['Sockets open', `${fmt.n(sockets.open)} of ${fmt.n(sockets.max_sessions)}`],
        ['A key may hold', fmt.n(sockets.sessions_per_key)],
        ['Sessions pinned', fmt.n(pinned)],
        ['Pins moved since start', fmt.n(moves)],
      ]),
      h('h2', { text: 'Open sockets' }),
      h('p', { class: 'muted views-explain', text: 'Long-lived sockets on this instance (Responses over WebSocket): each turn on one is a request, admitted, billed and in the ledger like any other.' }),
      table('Sockets open on this instance, oldest first', ['Socket', 'Kind', 'Key', 'Group', 'Opened (UTC)', 'Open for', 'Turns', 'Last turn'],
        sockets.data.map((s) => [`#${s.id}`, s.kind, key(s), s.group || '–', fmt.time(s.opened_at_ms), span(now - s.opened_at_ms), fmt.n(s.turns),
          s.last_turn_at_ms ? `${span(now - s.last_turn_at_ms)} ago` : 'none yet']),
        'No socket is open.'),
      h('h2', { text: 'Session pins' }),
      h('p', { class: 'muted views-explain', text: 'Each pool with session affinity keeps a session on one lane (the vendor\'s prompt cache stays warm); a session whose lane changed often loses it each time.' }),
      pins.length
        ? pins.map((p) => h('section', { class: 'views-pool', 'aria-label': `Pins of ${p.pool}` },
          h('h3', { text: `${p.pool}: ${fmt.n(p.pinned)} pinned, ${fmt.n(p.moves)} moved` }),
          table(`Sessions pinned in ${p.pool}, most moved first`, ['Session', 'Lane', 'Lane changes', 'Pin lasts'],
            p.sessions.map((s) => [h('code', { class: 'views-session', text: s.session }), s.lane, fmt.n(s.switches), span(s.expires_in_ms)]),
            'No session pinned.')))
        : h('p', { class: 'muted', text: 'No pool has session affinity.' }));
  }


  // --------------------------------------------------------------- runs --

  // A run's state as a badge: open, limited(<limit>), loop, killed.
  const RUN_ORDER = { killed: 0, loop: 1, limited: 2, open: 3 };
  const runKind = (state) => (state.startsWith('limited') ? 'limited' : state);
  const runLimit = (limits, name, text) => (limits[name] === null || limits[name] === undefined ? null : text(limits[name]));

  function runCaps(r) {
    const l = r.limits || {};
    return [
      runLimit(l, 'calls', (n) => `${fmt.n(r.calls)} of ${fmt.n(n)} calls`),
      runLimit(l, 'tool_calls', (n) => `${fmt.n(r.tool_calls)} of ${fmt.n(n)} tool calls`),
      runLimit(l, 'tokens', (n) => `${fmt.n(r.tokens)} of ${fmt.n(n)} tokens`),
      runLimit(l, 'wall_ms', (n) => `wall ${span(n)}`),
      runLimit(l, 'loop_repeats', (n) => `loop at ${n} repeats`),
    ].filter(Boolean).join(' · ') || 'no limit';
  }

  async function runsPage() {
    if (!session().governance) return show(h('p', { class: 'note', text: 'Governance is off: runs are tracked only for keys (groups.<g>.runs).' }));
    const params = new URLSearchParams(location.search);
    const state = ['open', 'limited', 'loop', 'killed'].includes(params.get('state')) ? params.get('state') : '';
    const listed = await api(`runs${state ? `?state=${state}` : ''}`);
    const now = Date.now();
    const runs = listed.runs.slice().sort((a, b) => RUN_ORDER[runKind(a.state)] - RUN_ORDER[runKind(b.state)]
      || b.last_seen_ms - a.last_seen_ms || a.id.localeCompare(b.id));
    const count = (kind) => listed.runs.filter((r) => runKind(r.state) === kind).length;
    const form = h('form', { class: 'card filters', method: 'get', action: '/ui/runs', 'aria-label': 'Which runs' },
      field('State', h('select', { name: 'state' }, [['', 'every run'], ['open', 'open'], ['limited', 'past a limit'], ['loop', 'looping'], ['killed', 'killed']]
        .map(([value, text]) => h('option', { value, text, selected: value === state })))),
      h('button', { type: 'submit', text: 'Show' }));
    const kill = (r) => (r.state === 'killed' ? h('span', { class: 'muted', text: 'killed' })
      : button('Kill', async () => {
        if (!confirm(`Kill run ${r.id} of key ${r.key}? Its next call is refused.`)) return;
        try {
          await api(`runs/${encodeURIComponent(r.id)}/kill?key=${encodeURIComponent(r.key)}`, { method: 'POST' });
          say(`Run ${r.id} is killed.`, 'ok');
          await c.render();
        } catch (err) { say(`Could not kill: ${err.message}`, 'error'); }
      }, { class: 'danger', 'aria-label': `Kill run ${r.id} of key ${r.key}` }));
    show(
      tiles('Runs now', [
        ['Runs', fmt.n(listed.runs.length)],
        ['Open', fmt.n(count('open'))],
        ['Past a limit', fmt.n(count('limited'))],
        ['Looping', fmt.n(count('loop'))],
        ['Killed', fmt.n(count('killed'))],
      ]),
      h('p', { class: 'muted views-explain', text: 'An agent run is the calls that name one run id (an A2A task, an MCP session, Claude Code\'s or Codex\'s session, or x-switchyard-run), per key. A run past a limit of its group\'s runs: finishes the call in flight and is refused after; Kill refuses its next call at once. Counted on this instance.' }),
      canChange() ? null : readOnly('runs'),
      form,
      table('Agent runs, stopped first, then last seen first', ['Run', 'Key', 'Group', 'State', 'Spend', 'Calls and limits', 'Started (UTC)', 'Last seen', 'Actions'],
        runs.map((r) => [
          h('code', { class: 'views-session', text: r.id }),
          h('a', { href: `/ui/keys?id=${encodeURIComponent(r.key)}`, text: r.key }),
          r.group || '–',
          h('span', { class: `badge run ${runKind(r.state)}`, text: r.state }),
          r.limits && r.limits.usd ? meter(r.spent_usd, r.limits.usd / 1e9, `run ${r.id} spend`) : fmt.usd(r.spent_usd),
          h('span', {}, `${fmt.n(r.calls)} calls, ${fmt.n(r.tool_calls)} tool calls${r.in_flight ? `, ${fmt.n(r.in_flight)} in flight` : ''}`, h('br'), h('span', { class: 'muted', text: runCaps(r) })),
          fmt.time(r.started_ms),
          `${span(now - r.last_seen_ms)} ago`,
          kill(r),
        ]),
        state ? 'No run in this state.' : 'No run yet: a key\'s calls are tracked once a group of its sets runs: and a call names a run.'));
  }

  Object.assign(c.pages, {
    budgets: ['Budgets & forecasts', budgetsPage, true],
    reconciliation: ['Reconciliation', reconciliationPage, false],
    sessions: ['Sockets & session pins', sessionsPage, true],
    runs: ['Agent runs', runsPage, true],
  });
  // Reconciliation, sockets and pins are the gateway's, not a tenant's
  // (the API refuses them): a tenant admin is not offered them.
  c.tenantHidden.push('reconciliation', 'sessions');
})();
