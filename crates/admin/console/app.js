// Switchyard console: draws the page its path names from the admin API.
// Every node is built with DOM calls (never parsed HTML), so nothing the API
// returns can run as markup; mutations echo the session's anti-CSRF token.
'use strict';

(() => {
  const API = '/api/v1/admin';
  const SVG = 'http://www.w3.org/2000/svg';
  let session = null;
  let refreshTimer = null;

  // ---------------------------------------------------------------- dom --

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
      else if (name === 'text') node.textContent = value;
      else if (name === 'class') node.className = value;
      else node.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === 'text') node.textContent = value;
      else node.setAttribute(name, String(value));
    }
    for (const child of children.flat()) if (child) node.append(child);
    return node;
  }

  const $ = (id) => document.getElementById(id);

  // The page's nodes; arrays are flattened and empty parts dropped (a
  // null or an array must never reach the page as text).
  function show(...nodes) {
    $('content').replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false && n !== ''));
  }

  function say(message, kind) {
    const status = $('status');
    status.className = kind || '';
    status.textContent = message || '';
  }

  // ---------------------------------------------------------------- api --

  async function api(path, options) {
    const init = Object.assign({ method: 'GET', headers: {} }, options || {});
    if (init.method !== 'GET') init.headers['x-csrf-token'] = session ? session.csrf : '';
    if (init.json !== undefined) {
      init.headers['content-type'] = 'application/json';
      init.body = JSON.stringify(init.json);
    }
    const response = await fetch(path.startsWith('/') ? path : `${API}/${path}`, init);
    if (response.status === 401) {
      location.assign('/ui/login');
      throw new Error('signed out');
    }
    const type = response.headers.get('content-type') || '';
    const body = type.includes('json') ? await response.json() : await response.text();
    if (!response.ok) {
      const message = body && body.error ? body.error.message : `HTTP ${response.status}`;
      const error = new Error(message);
      error.status = response.status;
      error.body = body;
      throw error;
    }
    return body;
  }

  const canChange = () => session && session.scope === 'full';
  // A tenant admin's group: the console shows that subtree, and hides what
  // the gateway's admin alone may do (pools, MCP, the playground, config).
  const tenant = () => (session && session.tenant) || null;
  const TENANT_HIDDEN = ['pools', 'mcp', 'playground', 'config'];
  // A group select's first choice: none (a root) for the gateway's admin;
  // a tenant admin's keys and groups stay under its own group.
  const noGroup = (text) => (tenant() ? null : h('option', { value: '', text }));
  // What a read-only token sees in place of a form it could not send.
  const readOnly = (what) => h('p', { class: 'note read-only', text: `Your token is read-only: ${what} here are shown, not changed.` });

  // An idempotency key (crypto.randomUUID needs a secure context; this does not).
  const freshId = () => Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');

  // ------------------------------------------------------------- format --

  const number = new Intl.NumberFormat('en-US');
  const fmt = {
    n: (v) => (v === null || v === undefined ? '–' : number.format(v)),
    usd: (v) => (v === null || v === undefined ? '–' : `$${v < 1 && v > 0 ? v.toFixed(6) : v.toFixed(2)}`),
    ms: (v) => (v === null || v === undefined ? '–' : v < 10 ? `${v.toFixed(2)} ms` : `${Math.round(v)} ms`),
    // Whole milliseconds, as the ledger keeps them.
    wholeMs: (v) => (v === null || v === undefined ? '–' : v < 1 ? '< 1 ms' : `${number.format(v)} ms`),
    pct: (v) => (v === null || v === undefined ? '–' : `${(v * 100).toFixed(v < 0.1 && v > 0 ? 2 : 1)} %`),
    rps: (v) => (v === null || v === undefined ? '–' : v.toFixed(v < 10 ? 2 : 0)),
    time: (ms) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19),
    // How long ago, in words, with the UTC time beside it: "12 min ago (18:40 UTC)".
    ago: (ms) => {
      const seconds = Math.max(0, Math.round((Date.now() - ms) / 1000));
      const words = seconds < 60 ? 'just now' : seconds < 3600 ? `${Math.floor(seconds / 60)} min ago`
        : seconds < 86400 ? `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min ago` : `${Math.floor(seconds / 86400)} d ago`;
      const today = new Date(ms).toISOString().slice(0, 10) === new Date().toISOString().slice(0, 10);
      return `${words} (${new Date(ms).toISOString().slice(today ? 11 : 0, 16).replace('T', ' ')} UTC)`;
    },
    clock: (s) => new Date(s * 1000).toISOString().slice(11, 16),
  };

  function meter(value, max, label) {
    if (max === null || max === undefined || max <= 0) return h('span', { class: 'muted', text: 'no cap' });
    const share = Math.min(value / max, 1);
    return h('span', { class: 'bar' },
      h('meter', { min: 0, max: 1, low: 0.7, high: 0.9, optimum: 0, value: String(share), 'aria-label': label }),
      h('span', { class: 'bar-text', text: `${fmt.usd(value)} of ${fmt.usd(max)}` }));
  }

  // A key's budget bar; a key refused now (a quota or a group's budget
  // used up) is never a green bar, and says why.
  function keyBudget(key, value, label) {
    const bar = key.budget && key.usage ? meter(value, key.budget.usd, label)
      : key.usage ? h('span', {}, `${fmt.usd(key.usage.spent_usd)} spent`) : h('span', {}, '–');
    if (!key.refusing) return bar;
    // The meter's worst region starts at once: drawn red whatever the share.
    for (const m of bar.querySelectorAll('meter')) { m.setAttribute('low', '0'); m.setAttribute('high', '0'); }
    return h('span', { class: 'refusing' }, bar, h('br'), h('span', { class: 'badge refused', text: `refused: ${key.refusing}` }));
  }

  function headroom(share, label) {
    if (share === null || share === undefined) return h('span', { class: 'muted', text: 'no limit' });
    return h('span', { class: 'bar' },
      h('meter', { min: 0, max: 1, low: 0.2, high: 0.5, optimum: 1, value: share.toFixed(4), 'aria-label': label }),
      h('span', { class: 'bar-text', text: `${fmt.pct(share)} left` }));
  }

  function table(caption, columns, rows, empty) {
    if (!rows.length) return h('p', { class: 'muted', text: empty || 'Nothing yet.' });
    return h('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': `${caption} (scrolls sideways)` }, h('table', {},
      h('caption', { text: caption }),
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((cell) => h('td', {}, cell)))))));
  }

  function button(label, onclick, extra) {
    const disabled = !canChange();
    return h('button', Object.assign({
      type: 'button',
      onclick,
      disabled,
      title: disabled ? 'Your token is read-only' : null,
    }, extra || {}), label);
  }

  // A form's optional number (empty: none).
  const numberOr = (value) => (value === null || value === '' ? undefined : Number(value));

  // -------------------------------------------------------------- chart --

  // A line chart of `series` over `points` (each point has `at` in seconds).
  // On a phone a chart is drawn as narrow as its box, so its text is drawn
  // at its own size (a wide drawing scaled down made it 5-6 px).
  const chartWidth = (wide) => (window.innerWidth < 640 ? 340 : wide);

  function lineChart(title, points, series, format) {
    const width = chartWidth(640), height = 170, left = 56, bottom = 22, top = 10, right = 10;
    // A window without a request has nothing to draw: no line of zeros.
    if (!points.some((p) => p.requests > 0)) {
      return h('figure', { class: 'chart-box' }, h('figcaption', { text: title }), h('p', { class: 'muted no-data', text: 'No data in this window.' }));
    }
    const values = points.flatMap((p) => series.map((x) => p[x.key]).filter((v) => v !== null && v !== undefined));
    const max = Math.max(...values, 0) || 1;
    const x = (i) => left + (i * (width - left - right)) / Math.max(points.length - 1, 1);
    const y = (v) => top + (height - top - bottom) * (1 - v / max);
    const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `${title}, peak ${format(max)}`, class: 'chart' },
      s('line', { x1: left, y1: y(0), x2: width - right, y2: y(0), class: 'axis' }),
      s('line', { x1: left, y1: y(max), x2: width - right, y2: y(max), class: 'grid' }),
      s('text', { x: left - 6, y: y(max) + 4, 'text-anchor': 'end', class: 'label', text: format(max) }),
      s('text', { x: left - 6, y: y(0) + 4, 'text-anchor': 'end', class: 'label', text: format(0) }));
    if (points.length) {
      svg.append(s('text', { x: left, y: height - 4, class: 'label', text: fmt.clock(points[0].at) }));
      svg.append(s('text', { x: width - right, y: height - 4, 'text-anchor': 'end', class: 'label', text: fmt.clock(points[points.length - 1].at) }));
    }
    for (const line of series) {
      const coords = points.map((p, i) => (p[line.key] === null || p[line.key] === undefined ? null : `${x(i).toFixed(1)},${y(p[line.key]).toFixed(1)}`))
        .filter(Boolean).join(' ');
      if (coords) svg.append(s('polyline', { points: coords, class: `series ${line.cls}` }));
    }
    const legend = h('ul', { class: 'legend' }, series.map((line) => h('li', { class: line.cls, text: line.label })));
    return h('figure', { class: 'chart-box' }, h('figcaption', { text: title }), svg, legend);
  }

  // Lines of `series` ({label, values}) over steps starting at `starts`
  // (Unix seconds); each point carries its value for a pointer's hover.
  function seriesChart(title, starts, series, format, stepSeconds) {
    const width = chartWidth(720), height = 220, left = 84, bottom = 22, top = 10, right = 10;
    const values = series.flatMap((line) => line.values);
    if (!values.some((v) => v > 0)) {
      return h('figure', { class: 'chart-box' }, h('figcaption', { text: title }), h('p', { class: 'muted no-data', text: 'No data in this range.' }));
    }
    const max = Math.max(...values) || 1;
    const x = (i) => left + (i * (width - left - right)) / Math.max(starts.length - 1, 1);
    const y = (v) => top + (height - top - bottom) * (1 - v / max);
    const when = (at) => (stepSeconds >= 86400 ? isoDate(at) : `${isoDate(at)} ${fmt.clock(at)}`);
    const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `${title}, peak ${format(max)}`, class: 'chart' },
      s('line', { x1: left, y1: y(0), x2: width - right, y2: y(0), class: 'axis' }),
      s('line', { x1: left, y1: y(max), x2: width - right, y2: y(max), class: 'grid' }),
      s('text', { x: left - 6, y: y(max) + 4, 'text-anchor': 'end', class: 'label', text: format(max) }),
      s('text', { x: left - 6, y: y(0) + 4, 'text-anchor': 'end', class: 'label', text: format(0) }),
      s('text', { x: left, y: height - 4, class: 'label', text: when(starts[0]) }),
      s('text', { x: width - right, y: height - 4, 'text-anchor': 'end', class: 'label', text: when(starts[starts.length - 1]) }));
    series.forEach((line, n) => {
      const cls = `series s${n % 9}`;
      svg.append(s('polyline', { points: line.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' '), class: cls }));
      line.values.forEach((v, i) => svg.append(s('circle', { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3, class: `point s${n % 9}` },
        s('title', { text: `${line.label}, ${when(starts[i])}: ${format(v)}` }))));
    });
    const legend = h('ul', { class: 'legend' }, series.map((line, n) => h('li', { class: `s${n % 9}`, text: line.label })));
    return h('figure', { class: 'chart-box wide' }, h('figcaption', { text: title }), svg, legend);
  }

  // Horizontal bars of `rows` ({label, value}).
  function barChart(title, rows, format) {
    const shown = rows.slice(0, 12);
    const max = Math.max(...shown.map((r) => r.value), 0) || 1;
    const rowHeight = 22, width = chartWidth(760), left = width < 760 ? 120 : 200, room = width < 760 ? 16 : 28;
    const svg = s('svg', { viewBox: `0 0 ${width} ${shown.length * rowHeight + 6}`, role: 'img', 'aria-label': title, class: 'chart bars' });
    shown.forEach((row, i) => {
      const y = i * rowHeight + 3;
      const w = Math.max(((width - left - 90) * row.value) / max, row.value > 0 ? 1 : 0);
      svg.append(s('text', { x: left - 8, y: y + 14, 'text-anchor': 'end', class: 'label', text: row.label.length > room ? `${row.label.slice(0, room - 1)}…` : row.label }));
      svg.append(s('rect', { x: left, y, width: w.toFixed(1), height: rowHeight - 6, class: 'bar-fill' }));
      svg.append(s('text', { x: left + w + 6, y: y + 14, class: 'label', text: format(row.value) }));
    });
    return h('figure', { class: 'chart-box' }, h('figcaption', { text: title }), svg);
  }

  // -------------------------------------------------------------- pages --

  function tiles(label, total, now) {
    const tile = (name, value) => h('div', { class: 'tile' }, h('dt', { text: name }), h('dd', { text: value }));
    return h('section', { class: 'window', 'aria-label': label }, h('h2', { text: label }), h('dl', { class: 'tiles' },
      now ? tile('Requests/s, last minute', fmt.rps(now.rps)) : null,
      tile(now ? 'Requests/s, hour average' : 'Requests/s, day average', fmt.rps(total.rps)),
      tile('Requests', fmt.n(total.requests)),
      tile('Error rate (5xx)', fmt.pct(total.error_rate)),
      tile('Refused (4xx)', fmt.pct(total.client_error_rate)),
      tile('Latency p50 / p99', `${fmt.ms(total.p50_ms)} / ${fmt.ms(total.p99_ms)}`),
      tile('First byte p50 / p99', `${fmt.ms(total.ttfb_p50_ms)} / ${fmt.ms(total.ttfb_p99_ms)}`),
      tile('Tokens in / out', `${fmt.n(total.input_tokens)} / ${fmt.n(total.output_tokens)}`),
      tile('Spend', fmt.usd(total.usd))));
  }

  function downLanes(pools) {
    const rows = [];
    for (const pool of pools) {
      for (const lane of pool.lanes) {
        if (lane.breaker === 'closed' && !lane.resting_ms) continue;
        rows.push([pool.pool, lane.lane, badge(lane), lane.reason ? shortReason(lane.reason) : (lane.resting_ms ? 'rate limited upstream' : '–'),
          lane.retry_in_ms !== null ? `${Math.ceil(lane.retry_in_ms / 1000)} s` : lane.resting_ms ? `${Math.ceil(lane.resting_ms / 1000)} s` : '–']);
      }
    }
    return h('section', { 'aria-label': 'Lanes down' }, h('h2', { text: 'Lanes down now' }),
      table('Lanes whose breaker is not closed', ['Pool', 'Lane', 'Breaker', 'Why', 'Next try in'], rows, 'Every lane is up.'));
  }

  // The alerts firing now (kept with or without a webhook), with when in
  // words and any silence.
  function openAlerts(report) {
    const rows = report.open.map((a) => [a.kind.replaceAll('_', ' '), a.subject, a.detail, fmt.ago(a.at), silenceOf(a)]);
    return h('section', { 'aria-label': 'Open alerts' }, h('h2', { text: 'Open alerts' }),
      table('Alerts firing now', ['Kind', 'Subject', 'What happened', 'Since', 'Silenced'], rows, 'Nothing is firing.'));
  }

  // An alert's silence in words, and (full access, not a tenant) the
  // controls that silence it for a while or end its silence.
  function silenceOf(alert, controls) {
    const until = alert.silenced_until ? h('span', { class: 'muted', text: `until ${fmt.time(alert.silenced_until).slice(11, 16)} UTC${alert.silenced_by ? ` (by ${alert.silenced_by})` : ''}` }) : null;
    if (!controls || !canChange() || tenant()) return until || '–';
    const name = `${alert.kind.replaceAll('_', ' ')} about ${alert.subject}`;
    const send = async (method, json, done) => {
      try {
        await api('alerts/silences', { method, json });
        say(done, 'ok');
        await render();
      } catch (err) { say(`Not changed: ${err.message}`, 'error'); }
    };
    if (alert.silenced_until) {
      return h('span', { class: 'actions' }, until, button('Unsilence', () => send('DELETE', { kind: alert.kind, subject: alert.subject }, `${name} is sent again.`),
        { 'aria-label': `Unsilence ${name}` }));
    }
    const length = h('select', { 'aria-label': `Silence ${name} for` }, [['30m', '30 minutes'], ['1h', '1 hour'], ['4h', '4 hours'], ['1d', '1 day']]
      .map(([value, text]) => h('option', { value, text })));
    return h('span', { class: 'actions' }, length, button('Silence', () => send('POST', { kind: alert.kind, subject: alert.subject, for: length.value },
      `${name} silenced for ${length.selectedOptions[0].textContent}.`), { 'aria-label': `Silence ${name}` }));
  }

  // A breaker's reason as a short cause; the whole error chain stays one
  // click away.
  function shortReason(raw) {
    if (!raw) return '–';
    const causes = [
      [/connection refused|tcp connect error/i, 'connection refused'],
      [/timed out|timeout|deadline/i, 'timed out'],
      [/dns|resolve|lookup/i, 'name not found'],
      [/tls|certificate|handshake/i, 'TLS failed'],
      [/\b429\b|rate.?limit/i, 'rate limited'],
      [/\b(5\d\d)\b/, (m) => `upstream ${m[1]}`],
      [/reset|broken pipe|closed/i, 'connection lost'],
      [/unreachable/i, 'unreachable'],
    ];
    let short = raw.length > 40 ? `${raw.slice(0, 39)}…` : raw;
    for (const [pattern, name] of causes) {
      const match = raw.match(pattern);
      if (match) { short = typeof name === 'function' ? name(match) : name; break; }
    }
    if (short === raw) return raw;
    return h('details', { class: 'reason' }, h('summary', { text: short }), h('code', { text: raw }));
  }

  // What stands out now: the busiest pools of the last minutes, the keys
  // that spent most today, and the lanes failing most (from the counters
  // the gateway keeps: no ledger scan).
  function tops(pools, keys) {
    const busiest = pools.map((p) => ({ name: p.pool, n: p.lanes.reduce((sum, l) => sum + (l.recent_requests || 0), 0) }))
      .filter((p) => p.n > 0).sort((a, b) => b.n - a.n).slice(0, 5);
    const spenders = keys ? keys.data.filter((line) => line.value && line.usd > 0).slice(0, 5) : [];
    const common = pools.flatMap((p) => p.lanes.map((l) => ({ what: `${l.lane} in ${p.pool}`, failed: l.upstream_failures, limited: l.rate_limited })))
      .filter((l) => l.failed + l.limited > 0).sort((a, b) => (b.failed + b.limited) - (a.failed + a.limited)).slice(0, 5);
    const list = (title, items, empty) => h('section', { class: 'top-list', 'aria-label': title }, h('h2', { text: title }),
      items.length ? h('ol', {}, items) : h('p', { class: 'muted', text: empty }));
    return h('div', { class: 'tops' },
      list('Busiest pools, last minutes', busiest.map((p) => h('li', {}, h('a', { href: '/ui/pools', text: p.name }), ` · ${fmt.n(p.n)} requests`)), 'No traffic in the last minutes.'),
      keys ? list('Top keys today', spenders.map((line) => h('li', {}, h('a', { href: `/ui/keys?id=${encodeURIComponent(line.value)}`, text: line.name || line.value }), ` · ${fmt.usd(line.usd)}`)), 'No spend today.') : null,
      list('Failing lanes, since start', common.map((e) => h('li', {}, h('a', { href: '/ui/pools', text: e.what }), ` · ${fmt.n(e.failed)} failed, ${fmt.n(e.limited)} rate limited`)), 'No lane has failed.'));
  }

  function badge(lane) {
    const state = lane.resting_ms && lane.breaker === 'closed' ? 'resting' : lane.breaker;
    return h('span', { class: `badge ${state}`, text: state.replace('_', '-') });
  }

  // A tenant admin's overview: its alerts, its keys' spend today and its
  // budgets (the gateway's traffic and lanes are not its to read).
  async function tenantOverview() {
    const today = `${isoDate(Date.now() / 1000)}T00:00:00Z`;
    const [alerts, keys] = await Promise.all([api('alerts'), api(`spend?by=key&from=${encodeURIComponent(today)}`)]);
    const spenders = keys.data.filter((line) => line.value && line.usd > 0).slice(0, 5);
    const budgets = keys.budgets || [];
    show(h('p', { class: 'note', text: `You administer group ${tenant()} and the groups and keys under it.` }),
      openAlerts(alerts),
      h('div', { class: 'tops' },
        h('section', { class: 'top-list', 'aria-label': 'Top keys today' }, h('h2', { text: 'Top keys today' }),
          spenders.length
            ? h('ol', {}, spenders.map((line) => h('li', {}, h('a', { href: `/ui/keys?id=${encodeURIComponent(line.value)}`, text: line.name || line.value }), ` · ${fmt.usd(line.usd)}`)))
            : h('p', { class: 'muted', text: 'No spend today.' })),
        h('section', { class: 'top-list', 'aria-label': 'Budgets' }, h('h2', { text: 'Budgets' }),
          budgets.length
            ? h('ol', {}, budgets.map((b) => h('li', {}, `${b.who} · ${fmt.usd(b.spent_usd)} of ${fmt.usd(b.cap_usd)}`, b.runs_out_in ? ` · runs out in ${b.runs_out_in}` : '')))
            : h('p', { class: 'muted', text: 'No budgets.' }))));
  }

  async function overview() {
    if (tenant()) return tenantOverview();
    const today = `${isoDate(Date.now() / 1000)}T00:00:00Z`;
    const [hour, day, pools, alerts, keys] = await Promise.all([
      api('history?window=1h'), api('history?window=1d'), api('lanes'), api('alerts'),
      session.governance ? api(`spend?by=key&from=${encodeURIComponent(today)}`) : null,
    ]);
    const parts = [];
    const firing = openAlerts(alerts);
    if (firing) parts.push(firing);
    parts.push(tops(pools, keys));
    if (!session.metrics) parts.push(h('p', { class: 'note', text: 'Metrics are off (telemetry.metrics: false): the history stays empty.' }));
    parts.push(downLanes(pools.filter((p) => !p.implicit || p.lanes.some((l) => l.breaker !== 'closed'))));
    // The last whole minute (the newest point is the minute still running).
    const lastMinute = hour.points.length > 1 ? hour.points[hour.points.length - 2] : hour.total;
    parts.push(h('div', { class: 'windows' }, tiles('Last hour', hour.total, lastMinute), tiles('Last day', day.total)));
    parts.push(h('div', { class: 'charts' },
      lineChart('Requests per second, last hour', hour.points, [{ key: 'rps', label: 'requests/s', cls: 'a' }], fmt.rps),
      lineChart('Latency, last hour', hour.points, [{ key: 'p50_ms', label: 'p50', cls: 'a' }, { key: 'p99_ms', label: 'p99', cls: 'b' }, { key: 'ttfb_p50_ms', label: 'first byte p50', cls: 'c' }], fmt.ms),
      lineChart('Error rate, last hour', hour.points, [{ key: 'error_rate', label: '5xx', cls: 'b' }, { key: 'client_error_rate', label: '4xx', cls: 'c' }], fmt.pct),
      lineChart('Spend, last day (per 15 minutes)', day.points, [{ key: 'usd', label: 'USD', cls: 'a' }], fmt.usd)));
    show(...parts);
  }

  async function poolsPage() {
    const pools = await api('lanes');
    const configured = pools.filter((p) => !p.implicit);
    const direct = pools.filter((p) => p.implicit);
    const settings = (pool) => {
      const f = pool.failover;
      const parts = [`strategy ${pool.strategy}`, `up to ${f.max_hops} hops in ${fmt.wholeMs(f.timeout_ms)}`];
      if (f.retries) parts.push(`${f.retries} retries on a lane`);
      if (f.first_token_ms) parts.push(`first token within ${fmt.wholeMs(f.first_token_ms)}`);
      parts.push(pool.fallback.length ? `then ${pool.fallback.join(', ')}` : 'no fallback pool');
      return h('p', { class: 'muted settings', text: parts.join(' · ') });
    };
    // An operator's change to one lane (drain, weight), then the page again.
    const change = async (pool, lane, body, done) => {
      try {
        await api(`lanes/${encodeURIComponent(pool.pool)}/${encodeURIComponent(lane.lane)}`, { method: 'PATCH', body: JSON.stringify(body) });
        say(done, 'ok');
        await render();
      } catch (err) {
        say(`Could not change ${lane.lane}: ${err.message}`, 'error');
      }
    };
    const weightForm = (pool, lane) => {
      const input = h('input', { type: 'number', min: '1', max: '1000000', step: '1', value: String(lane.weight), name: 'weight', 'aria-label': `Weight of ${lane.lane} in ${pool.pool}` });
      return h('form', { class: 'inline', onsubmit: (event) => {
        event.preventDefault();
        const weight = Number(input.value);
        if (!Number.isInteger(weight) || weight < 1 || weight > 1000000) return say('A weight is a whole number from 1 to 1,000,000; drain the lane to send it nothing.', 'error');
        const body = { weight: weight === lane.configured_weight ? null : weight };
        change(pool, lane, body, `${lane.lane} in ${pool.pool} now has weight ${weight}.`);
      } }, input, h('button', { type: 'submit', disabled: !canChange() }, 'Set'));
    };
    const actions = (pool, lane) => h('span', { class: 'actions' },
      lane.breaker === 'closed' ? '' : button('Reset breaker', async () => {
        try {
          await api(`lanes/${encodeURIComponent(pool.pool)}/${encodeURIComponent(lane.lane)}/reset`, { method: 'POST' });
          say(`Breaker of ${lane.lane} in ${pool.pool} reset.`, 'ok');
          await render();
        } catch (err) {
          say(`Could not reset: ${err.message}`, 'error');
        }
      }, { 'aria-label': `Reset breaker of ${lane.lane} in ${pool.pool}` }),
      lane.drained
        ? button('Undrain', () => change(pool, lane, { drained: false }, `${lane.lane} in ${pool.pool} takes requests again.`), { 'aria-label': `Undrain ${lane.lane} in ${pool.pool}` })
        : button('Drain', () => {
          if (!confirm(`Drain ${lane.lane} in ${pool.pool}? It takes no new requests from this pool until undrained.`)) return;
          change(pool, lane, { drained: true }, `${lane.lane} in ${pool.pool} drained: requests in flight finish, new ones go elsewhere.`);
        }, { 'aria-label': `Drain ${lane.lane} in ${pool.pool}` }),
      canChange() ? weightForm(pool, lane) : '');
    const weight = (lane) => lane.weight === lane.configured_weight ? fmt.n(lane.weight)
      : h('span', {}, fmt.n(lane.weight), h('br'), h('span', { class: 'muted', text: `configured ${fmt.n(lane.configured_weight)}` }));
    const latency = (lane) => lane.p50_ms === null || lane.p50_ms === undefined ? h('span', { class: 'muted', text: 'no answers' })
      : `${fmt.ms(lane.p50_ms)} / ${fmt.ms(lane.p99_ms)}`;
    const section = (pool) => h('section', { class: 'pool' },
      h('h2', {}, pool.pool),
      settings(pool),
      // The actions come second: a long breaker reason never pushes them off the table.
      table(`Lanes of ${pool.pool}`, ['Lane', 'Actions', 'Upstream', 'Weight', 'Share (5 min)', 'Breaker', 'Why', 'Answered / failed / rate limited', 'Trips', 'In flight', 'p50 / p99 (5 min)'],
        pool.lanes.map((lane) => [
          lane.lane,
          actions(pool, lane),
          h('span', {}, `${lane.provider} (${lane.protocol})`, h('br'), h('code', { class: 'muted', text: lane.model })),
          weight(lane),
          lane.share === null ? h('span', { class: 'muted', text: 'no traffic' })
            : h('span', { class: 'bar' }, h('meter', { min: 0, max: 1, value: lane.share.toFixed(4), 'aria-label': `${lane.lane} share` }), h('span', { class: 'bar-text', text: fmt.pct(lane.share) })),
          lane.drained ? h('span', {}, badge(lane), ' ', h('span', { class: 'badge drained', text: 'drained' })) : badge(lane),
          shortReason(lane.reason),
          `${fmt.n(lane.ok)} / ${fmt.n(lane.upstream_failures)} / ${fmt.n(lane.rate_limited)}`,
          fmt.n(lane.trips),
          lane.max_concurrent ? `${lane.in_flight} / ${lane.max_concurrent}` : `${lane.in_flight}`,
          latency(lane),
        ])));
    const parts = configured.map(section);
    // A model named directly is a pool of one lane of its own.
    if (direct.length) {
      const down = direct.some((p) => p.lanes.some((l) => l.breaker !== 'closed'));
      parts.push(h('details', { class: 'direct', open: down || !configured.length },
        h('summary', { text: `Models named directly (${direct.length})` }), direct.map(section)));
    }
    show(...parts);
  }

  function field(label, input) {
    return h('label', { class: 'field' }, h('span', { text: label }), input);
  }

  async function keysPage() {
    if (!session.governance) return show(h('p', { class: 'note', text: 'Governance is off: set auth.mode: keys or storage: in the config to keep keys.' }));
    const asked = new URLSearchParams(location.search).get('id');
    if (asked) return keyPage(asked);
    const cursor = new URLSearchParams(location.search).get('cursor');
    const page = new URLSearchParams({ limit: '100' });
    if (cursor) page.set('cursor', cursor);
    const [keys, groups] = await Promise.all([api(`keys?${page}`), api('groups')]);
    const created = h('div', { id: 'created' });
    const form = h('form', { class: 'card', 'aria-label': 'Create a key' },
      h('h2', { text: 'Create a key' }),
      h('div', { class: 'fields' },
        field('Name', h('input', { name: 'name', required: true, autocomplete: 'off' })),
        field('Group', h('select', { name: 'group' }, noGroup('(none)'), groups.map((g) => h('option', { value: g.name, text: g.name })))),
        field('Pools (comma-separated, empty: all)', h('input', { name: 'pools', autocomplete: 'off' })),
        field('Budget USD', h('input', { name: 'usd', type: 'number', min: '0', step: 'any' })),
        field('Budget window', h('select', { name: 'window' }, ['1mo', '1d', '7d', '1h', 'total'].map((w) => h('option', { value: w, text: w })))),
        field('Requests per minute', h('input', { name: 'rpm', type: 'number', min: '1' })),
        field('Tokens per minute', h('input', { name: 'tpm', type: 'number', min: '1' }))),
      button('Create key', null, { type: 'submit' }));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const body = { name: data.get('name') };
      if (data.get('group')) body.group = data.get('group');
      const pools = String(data.get('pools') || '').split(',').map((p) => p.trim()).filter(Boolean);
      if (pools.length) body.pools = pools;
      if (data.get('usd')) body.budget = { usd: Number(data.get('usd')), window: data.get('window') };
      const limits = {};
      if (data.get('rpm')) limits.rpm = Number(data.get('rpm'));
      if (data.get('tpm')) limits.tpm = Number(data.get('tpm'));
      if (Object.keys(limits).length) body.limits = limits;
      try {
        const key = await api('keys', { method: 'POST', json: body, headers: { 'idempotency-key': freshId() } });
        await render();
        secretShown(key, 'created');
      } catch (err) {
        say(`Could not create the key: ${err.message}`, 'error');
      }
    });
    const params = new URLSearchParams(location.search);
    const search = (params.get('q') || '').toLowerCase();
    const showRevoked = params.get('revoked') === 'show';
    const order = params.get('sort') || 'name';
    const near = params.get('near') === 'yes';
    // A key's budget left as a share (spent and held both count); none: 1.
    const left = (key) => {
      if (!key.budget || !key.usage) return 1;
      if (key.budget.usd <= 0) return 0;
      return Math.max(0, key.budget.usd - key.usage.spent_usd - key.usage.reserved_usd) / key.budget.usd;
    };
    const shown = keys.data.filter((key) => (showRevoked || key.state !== 'revoked')
      && (!search || `${key.name} ${key.id} ${key.prefix} ${key.group || ''}`.toLowerCase().includes(search))
      && (!near || left(key) <= 0.2 || key.state === 'suspended' || key.refusing));
    // A key refused now has no headroom, whatever its own budget says.
    const room = (key) => (key.refusing ? -1 : left(key));
    if (order === 'headroom') shown.sort((a, b) => room(a) - room(b) || a.name.localeCompare(b.name));
    const filters = h('form', { class: 'card filters', method: 'get', action: '/ui/keys', 'aria-label': 'Find keys' },
      field('Search (name, id, prefix, group)', h('input', { name: 'q', type: 'search', value: params.get('q') || '', autocomplete: 'off' })),
      field('Order', h('select', { name: 'sort' }, [['name', 'as created'], ['headroom', 'least budget left first']]
        .map(([value, text]) => h('option', { value, text, selected: value === order })))),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'near', value: 'yes', checked: near }), ' Only near their budget (20 % or less left), refused or suspended'),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'revoked', value: 'show', checked: showRevoked }), ' Show revoked keys'),
      h('button', { type: 'submit', text: 'Find' }));
    const rows = shown.map((key) => [
      h('span', { class: 'key-name' }, h('a', { href: `/ui/keys?id=${encodeURIComponent(key.id)}` }, h('strong', { text: key.name })), h('br'), h('code', { class: 'muted', text: key.id })),
      h('code', { text: `${key.prefix}…` }),
      suspension(key),
      key.group || '–',
      key.pools ? key.pools.join(', ') : 'all',
      keyBudget(key, key.usage ? key.usage.spent_usd + key.usage.reserved_usd : 0, `${key.name} budget used (spent and held)`),
      key.usage ? headroom(key.usage.requests_headroom, `${key.name} requests per minute left`) : '–',
      key.usage ? headroom(key.usage.tokens_headroom, `${key.name} tokens per minute left`) : '–',
      key.state === 'revoked' ? '' : h('span', { class: 'actions' },
        editKey(key, groups),
        button('Rotate', async () => {
          if (!confirm(`Rotate ${key.name}? Its current secret stops working at once.`)) return;
          try {
            const rotated = await api(`keys/${encodeURIComponent(key.id)}/rotate`, { method: 'POST', headers: { 'idempotency-key': freshId() } });
            await render();
            secretShown(rotated, 'rotated');
          } catch (err) { say(`Could not rotate: ${err.message}`, 'error'); }
        }, { 'aria-label': `Rotate ${key.name}` }),
        button('Revoke', async () => {
          if (!confirm(`Revoke ${key.name}? This is final.`)) return;
          try {
            await api(`keys/${encodeURIComponent(key.id)}`, { method: 'DELETE' });
            say(`${key.name} is revoked.`, 'ok');
            await render();
          } catch (err) { say(`Could not revoke: ${err.message}`, 'error'); }
        }, { class: 'danger', 'aria-label': `Revoke ${key.name}` })),
    ]);
    const more = keys.next_cursor ? h('p', {}, h('a', { href: `/ui/keys?cursor=${encodeURIComponent(keys.next_cursor)}`, text: 'More keys →' })) : null;
    show(created, canChange() ? form : readOnly('keys'), h('h2', { text: 'Keys' }), filters,
      table('Virtual keys', ['Key', 'Prefix', 'State', 'Group', 'Pools', 'Budget', 'Requests/min left', 'Tokens/min left', 'Actions'], rows,
        keys.data.length ? 'No key matches.' : 'No keys yet.'), more);
  }

  // A key's state; a suspension with its end, and (full access) its lifting.
  function suspension(key) {
    const state = h('span', { class: `badge ${key.state}`, text: key.state });
    if (key.state !== 'suspended') return state;
    const until = key.suspended_until ? `until ${fmt.time(key.suspended_until * 1000)} UTC` : 'until lifted';
    return h('span', { class: 'actions' }, state, h('span', { class: 'muted', text: until }),
      button('Lift', async () => {
        if (!confirm(`Lift the suspension of ${key.name}? It serves again at once.`)) return;
        try {
          await api(`keys/${encodeURIComponent(key.id)}/suspension`, { method: 'DELETE' });
          say(`${key.name} serves again.`, 'ok');
          await render();
        } catch (err) { say(`Could not lift: ${err.message}`, 'error'); }
      }, { 'aria-label': `Lift the suspension of ${key.name}` }));
  }

  // A key's settings changed in place: budget, limits, pools, group,
  // expiry, against the version read (a change made meanwhile is refused).
  function editKey(key, groups) {
    if (!canChange()) return null;
    const details = h('details', { class: 'edit' }, h('summary', { text: 'Edit', 'aria-label': `Edit ${key.name}` }));
    const form = h('form', { 'aria-label': `Settings of ${key.name}` },
      h('div', { class: 'fields' },
        field('Name', h('input', { name: 'name', value: key.name, required: true, autocomplete: 'off' })),
        field('Group', h('select', { name: 'group' }, noGroup('(none)'),
          groups.map((g) => h('option', { value: g.name, text: g.name, selected: g.name === key.group })))),
        field('Pools (comma-separated, empty: all)', h('input', { name: 'pools', value: key.pools ? key.pools.join(', ') : '', autocomplete: 'off' })),
        field('Budget USD (empty: none)', h('input', { name: 'usd', type: 'number', min: '0', step: 'any', value: key.budget ? key.budget.usd : '' })),
        field('Budget window', h('select', { name: 'window' }, ['1mo', '1d', '7d', '1h', 'total'].map((w) => h('option', { value: w, text: w, selected: key.budget && key.budget.window === w })))),
        field('Requests per minute', h('input', { name: 'rpm', type: 'number', min: '1', value: key.limits.rpm ?? '' })),
        field('Tokens per minute', h('input', { name: 'tpm', type: 'number', min: '1', value: key.limits.tpm ?? '' })),
        field('Expires (UTC date, empty: never)', h('input', { name: 'expires', type: 'date', value: key.expires_at ? isoDate(key.expires_at) : '' })),
        field('Metadata (a JSON object)', h('textarea', { name: 'metadata', rows: 3, spellcheck: 'false', text: JSON.stringify(key.metadata || {}) }))),
      button('Save', null, { type: 'submit', 'aria-label': `Save ${key.name}` }));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const pools = String(data.get('pools') || '').split(',').map((p) => p.trim()).filter(Boolean);
      const body = {
        name: data.get('name'),
        group: data.get('group') || null,
        pools: pools.length ? pools : null,
        budget: data.get('usd') ? { usd: Number(data.get('usd')), window: data.get('window') } : null,
        limits: { rpm: numberOr(data.get('rpm')), tpm: numberOr(data.get('tpm')), concurrent: key.limits.concurrent ?? undefined },
        expires_at: data.get('expires') ? `${data.get('expires')}T00:00:00Z` : null,
      };
      try {
        const metadata = JSON.parse(String(data.get('metadata') || '{}'));
        if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) throw new Error('not an object');
        body.metadata = metadata;
      } catch (err) {
        return say(`Metadata of ${key.name} is not a JSON object: ${err.message}`, 'error');
      }
      try {
        // Against the version this page read: a change made since is a 412.
        await api(`keys/${encodeURIComponent(key.id)}`, { method: 'PATCH', json: body, headers: { 'if-match': `"${key.etag}"` } });
        details.open = false;
        say(`${body.name} saved.`, 'ok');
        await render();
      } catch (err) {
        say(`Could not save ${key.name}: ${err.message}`, 'error');
      }
    });
    details.append(form);
    return details;
  }

  // The secret of a key just created or rotated, shown this once.
  function secretShown(key, verb) {
    const secret = h('code', { id: 'secret', text: key.key || '' });
    const copy = h('button', { type: 'button', id: 'copy', text: 'Copy' });
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(key.key);
        copy.textContent = 'Copied';
      } catch {
        getSelection().selectAllChildren(secret);
        copy.textContent = 'Selected: press Ctrl+C';
      }
    });
    const parts = [h('h2', { text: `Key ${key.name} ${verb}` }),
      h('p', { text: 'This is the only time the secret is shown. Copy it now.' }),
      h('p', { class: 'secret' }, secret, copy)];
    if (key.aws_secret_access_key) parts.push(h('p', {}, 'AWS: ', h('code', { text: `${key.aws_access_key_id} / ${key.aws_secret_access_key}` })));
    $('created').replaceChildren(h('section', { class: 'card secret-card', role: 'alert' }, ...parts));
  }

  // A member's own keys (self-serve): mint, rotate and revoke them; a
  // secret is shown once. Members see this page and nothing else.
  async function myKeysPage() {
    const keys = await api('/api/v1/self/keys');
    const form = h('form', { class: 'card', 'aria-label': 'Mint a key' },
      field('Name', h('input', { name: 'name', required: true, autocomplete: 'off', maxlength: '200' })),
      h('button', { type: 'submit', text: 'Mint key' }));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      try {
        const key = await api('/api/v1/self/keys', { method: 'POST', json: { name: new FormData(form).get('name') } });
        await render();
        secretShown(key, 'minted');
      } catch (err) {
        say(`Could not mint a key: ${err.message}`, 'error');
      }
    });
    const act = (label, key, run) => h('button', { type: 'button', 'aria-label': `${label} ${key.name}`, onclick: run }, label);
    const rows = keys.map((key) => [
      key.name,
      h('code', { text: key.prefix }),
      h('span', { class: `badge ${key.state}`, text: key.state }),
      fmt.time(key.created_at * 1000),
      key.state === 'revoked' ? '' : h('span', { class: 'actions' },
        act('Rotate', key, async () => {
          if (!confirm(`Rotate ${key.name}? Its current secret stops working at once.`)) return;
          try {
            const rotated = await api(`/api/v1/self/keys/${encodeURIComponent(key.id)}/rotate`, { method: 'POST' });
            await render();
            secretShown(rotated, 'rotated');
          } catch (err) {
            say(`Could not rotate: ${err.message}`, 'error');
          }
        }),
        act('Revoke', key, async () => {
          if (!confirm(`Revoke ${key.name}? This is final.`)) return;
          try {
            await api(`/api/v1/self/keys/${encodeURIComponent(key.id)}`, { method: 'DELETE' });
            say(`${key.name} revoked.`, 'ok');
            await render();
          } catch (err) {
            say(`Could not revoke: ${err.message}`, 'error');
          }
        })),
    ]);
    show(h('div', { id: 'created' }), form,
      table('Your keys', ['Key', 'Prefix', 'State', 'Created (UTC)', 'Actions'], rows, 'You have no keys yet: mint one above.'));
  }

  async function groupsPage() {
    if (!session.governance) return show(h('p', { class: 'note', text: 'Governance is off: no groups.' }));
    const groups = await api('groups');
    // A root is a group without a parent, or (for a tenant admin) one whose
    // parent is outside the subtree it sees.
    const listed = new Set(groups.map((g) => g.name));
    const children = (parent) => groups.filter((g) => (g.parent && listed.has(g.parent) ? g.parent : null) === parent);
    const parentSelect = (current, self) => h('select', { name: 'parent' }, noGroup('(none: a root)'),
      groups.filter((g) => g.name !== self).map((g) => h('option', { value: g.name, text: g.name, selected: g.name === current })));
    const budgetFields = (group) => [
      field('Budget USD (empty: none)', h('input', { name: 'usd', type: 'number', min: '0', step: 'any', value: group && group.budget ? group.budget.usd : '' })),
      field('Budget window', h('select', { name: 'window' }, ['1mo', '1d', '7d', '1h', 'total'].map((w) => h('option', { value: w, text: w, selected: group && group.budget && group.budget.window === w })))),
      field('Requests per minute', h('input', { name: 'rpm', type: 'number', min: '1', value: group ? group.limits.rpm ?? '' : '' })),
      field('Tokens per minute', h('input', { name: 'tpm', type: 'number', min: '1', value: group ? group.limits.tpm ?? '' : '' })),
    ];
    const settingsOf = (data) => ({
      budget: data.get('usd') ? { usd: Number(data.get('usd')), window: data.get('window') } : null,
      limits: { rpm: numberOr(data.get('rpm')), tpm: numberOr(data.get('tpm')) },
    });
    const edit = (group) => {
      if (group.from_config) return h('span', { class: 'muted', text: ' (config file: change it there)' });
      if (!canChange()) return null;
      if (group.name === tenant()) return h('span', { class: 'muted', text: ' (your group: its budget and place are the gateway admin\'s)' });
      const form = h('form', { 'aria-label': `Settings of ${group.name}` },
        h('div', { class: 'fields' }, field('Parent', parentSelect(group.parent, group.name)), budgetFields(group)),
        h('p', { class: 'actions' }, button('Save', null, { type: 'submit', 'aria-label': `Save ${group.name}` }),
          button('Delete', async () => {
            if (!confirm(`Delete group ${group.name}? Its keys keep working without its budget.`)) return;
            try {
              await api(`groups/${encodeURIComponent(group.name)}`, { method: 'DELETE' });
              say(`${group.name} deleted.`, 'ok');
              await render();
            } catch (err) { say(`Could not delete ${group.name}: ${err.message}`, 'error'); }
          }, { class: 'danger', 'aria-label': `Delete ${group.name}` })));
      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        const data = new FormData(form);
        const body = Object.assign({ parent: data.get('parent') || null }, settingsOf(data));
        try {
          await api(`groups/${encodeURIComponent(group.name)}`, { method: 'PATCH', json: body, headers: { 'if-match': `"${group.etag}"` } });
          form.closest('details').open = false;
          say(`${group.name} saved.`, 'ok');
          await render();
        } catch (err) { say(`Could not save ${group.name}: ${err.message}`, 'error'); }
      });
      return h('details', { class: 'edit' }, h('summary', { text: 'Edit', 'aria-label': `Edit ${group.name}` }), form);
    };
    const node = (group) => h('li', {},
      h('div', { class: 'group' },
        h('strong', { text: group.name }),
        group.from_config ? h('span', { class: 'muted', text: ' (config file)' }) : null,
        h('span', { class: 'group-bar' }, group.budget && group.usage ? meter(group.usage.spent_usd, group.budget.usd, `${group.name} budget used`)
          : h('span', { class: 'muted', text: group.usage ? `${fmt.usd(group.usage.spent_usd)} spent, no cap` : 'no cap' })),
        group.budget ? h('span', { class: 'muted', text: ` per ${group.budget.window}` }) : null,
        edit(group)),
      children(group.name).length ? h('ul', {}, children(group.name).map(node)) : null);
    const create = h('form', { class: 'card', 'aria-label': 'Create a group' },
      h('h2', { text: 'Create a group' }),
      h('div', { class: 'fields' }, field('Name', h('input', { name: 'name', required: true, autocomplete: 'off' })), field('Parent', parentSelect(null, null)), budgetFields(null)),
      button('Create group', null, { type: 'submit' }));
    create.addEventListener('submit', async (event) => {
      event.preventDefault();
      const data = new FormData(create);
      const body = Object.assign({ name: data.get('name') }, settingsOf(data));
      if (data.get('parent')) body.parent = data.get('parent');
      if (!body.budget) delete body.budget;
      try {
        await api('groups', { method: 'POST', json: body });
        say(`${body.name} created.`, 'ok');
        await render();
      } catch (err) { say(`Could not create the group: ${err.message}`, 'error'); }
    });
    const roots = children(null);
    show(canChange() ? create : readOnly('groups'), h('h2', { text: 'Budget tree' }),
      roots.length ? h('ul', { class: 'tree', 'aria-label': 'Budget tree' }, roots.map(node)) : h('p', { class: 'muted', text: 'No groups yet.' }));
  }

  function isoDate(seconds) {
    return new Date(seconds * 1000).toISOString().slice(0, 10);
  }

  async function spendPage() {
    if (!session.governance) return show(h('p', { class: 'note', text: 'Governance is off: there is no ledger to read spend from.' }));
    const params = new URLSearchParams(location.search);
    const by = params.get('by') || 'key';
    const now = Date.now() / 1000;
    const day = (text) => (/^\d{4}-\d{2}-\d{2}$/.test(text || '') && !Number.isNaN(Date.parse(`${text}T00:00:00Z`)) ? text : null);
    const from = day(params.get('from')) || isoDate(now - 29 * 86400);
    const to = day(params.get('to')) || isoDate(now);
    // Whole days (UTC), the last one included: whole hours read from the ledger's hourly rollup.
    const end = isoDate(Date.parse(`${to}T00:00:00Z`) / 1000 + 86400);
    const query = new URLSearchParams({ by, from: `${from}T00:00:00Z`, to: `${end}T00:00:00Z` });
    const report = await api(`spend?${query}`);
    const form = h('form', { class: 'card filters', method: 'get', action: '/ui/spend', 'aria-label': 'Spend range' },
      field('By', h('select', { name: 'by' }, ['key', 'group', 'user', 'model', 'lane', 'operation'].map((b) => h('option', { value: b, text: b, selected: b === by })))),
      field('From', h('input', { type: 'date', name: 'from', value: from })),
      field('To', h('input', { type: 'date', name: 'to', value: to })),
      h('button', { type: 'submit', text: 'Show' }),
      h('a', { class: 'download', href: `${API}/spend?${query}&format=csv`, download: '', text: 'Download CSV' }));
    const label = (line) => (line.value ? (line.name ? `${line.name} (${line.value})` : line.value) : '(none)');
    // A group's spend includes its subgroups': its own is shown apart, and
    // the own column is what adds up to the total.
    const grouped = by === 'group';
    const columns = [by, 'Requests', 'Input tokens', 'Output tokens', 'Cache reads', 'Units'].concat(grouped ? ['Own USD', 'USD with subgroups'] : ['USD'], ['Saved', 'Cache hits', 'Guardrail decisions', 'Refused']);
    const o = report.outcomes;
    show(form,
      h('p', {}, 'Total: ', h('strong', { text: fmt.usd(report.total_usd) }), ' · saved by the response cache: ', h('strong', { text: fmt.usd(report.saved_usd) }),
        ` in ${fmt.n(o.cache_hits)} hits · ${fmt.n(o.guarded)} guardrail decisions · ${fmt.n(o.refused)} refused at the door`),
      grouped ? h('p', { class: 'note', text: 'A group\'s spend with subgroups includes its children\'s, so those figures add up to more than the total; the own figures add up to it.' }) : null,
      barChart(`Spend by ${by}${grouped ? ' (own)' : ''}`, report.data.map((line) => ({ label: label(line), value: grouped ? line.own_usd : line.usd })), fmt.usd),
      table(`Spend by ${by}, ${from} to ${to}`, columns,
        report.data.map((line) => [label(line), fmt.n(line.requests), fmt.n(line.input_tokens), fmt.n(line.output_tokens), fmt.n(line.cache_read_tokens), fmt.n(line.units)]
          .concat(grouped ? [fmt.usd(line.own_usd), fmt.usd(line.usd)] : [fmt.usd(line.usd)], [fmt.usd(line.saved_usd), fmt.n(line.cache_hits), fmt.n(line.guarded), fmt.n(line.refused)])),
        'No spend in this range.'));
  }

  const PRESETS = { '24h': [86400, 'hour'], '7d': [7 * 86400, 'day'], '30d': [30 * 86400, 'day'] };
  const METRICS = {
    usd: ['Spend', (v) => fmt.usd(v)], tokens: ['Tokens', (v) => fmt.n(v)], requests: ['Requests', (v) => fmt.n(v)],
    saved_usd: ['Saved by the cache', (v) => fmt.usd(v)], cache_hits: ['Cache hits', (v) => fmt.n(v)],
    guarded: ['Guardrail decisions', (v) => fmt.n(v)], refused: ['Refused', (v) => fmt.n(v)],
  };

  async function usagePage() {
    if (!session.governance) return show(h('p', { class: 'note', text: 'Governance is off: there is no ledger to read usage from.' }));
    const params = new URLSearchParams(location.search);
    const by = ['key', 'group', 'user', 'model', 'lane', 'operation'].includes(params.get('by')) ? params.get('by') : 'key';
    const range = PRESETS[params.get('range')] ? params.get('range') : '24h';
    const metric = METRICS[params.get('metric')] ? params.get('metric') : 'usd';
    const [seconds, step] = PRESETS[range];
    const to = (Math.floor(Date.now() / 3600000) + 1) * 3600;
    const report = await api(`usage?${new URLSearchParams({ by, step, from: String(to - seconds), to: String(to) })}`);
    const form = h('form', { class: 'card filters', method: 'get', action: '/ui/usage', 'aria-label': 'Usage range' },
      field('By', h('select', { name: 'by' }, ['key', 'group', 'user', 'model', 'lane', 'operation'].map((b) => h('option', { value: b, text: b, selected: b === by })))),
      field('Range', h('select', { name: 'range' }, Object.keys(PRESETS).map((r) => h('option', { value: r, text: `last ${r}`, selected: r === range })))),
      field('Show', h('select', { name: 'metric' }, Object.entries(METRICS).map(([m, [label]]) => h('option', { value: m, text: label, selected: m === metric })))),
      h('button', { type: 'submit', text: 'Show' }));
    const [label, format] = METRICS[metric];
    const name = (line) => (line.value ? (line.name ? `${line.name} (${line.value})` : line.value) : '(none)');
    const lines = report.series.map((line) => ({ label: name(line), values: line[metric] }));
    const sum = (values) => values.reduce((a, b) => a + b, 0);
    show(form,
      seriesChart(`${label} by ${by}, last ${range}, per ${step}`, report.starts, lines, format, report.step_seconds),
      table(`${label} by ${by}, last ${range}`, [by, 'Spend', 'Tokens', 'Requests', 'Saved', 'Cache hits', 'Guardrail decisions', 'Refused'],
        report.series.map((line) => [name(line), fmt.usd(sum(line.usd)), fmt.n(sum(line.tokens)), fmt.n(sum(line.requests)),
          fmt.usd(sum(line.saved_usd)), fmt.n(sum(line.cache_hits)), fmt.n(sum(line.guarded)), fmt.n(sum(line.refused))]), 'No usage in this range.'));
  }

  // One key: its state, budget and its reset, limits headroom, last use, and usage over a week.
  async function keyPage(id) {
    const [key, recent, refused, usage] = await Promise.all([
      api(`keys/${encodeURIComponent(id)}`),
      api(`requests?key=${encodeURIComponent(id)}&limit=1`),
      api(`requests?key=${encodeURIComponent(id)}&status=4xx&limit=500`),
      api(`usage?${new URLSearchParams({ by: 'model', step: 'day', key: id, from: String((Math.floor(Date.now() / 86400000) - 6) * 86400) })}`),
    ]);
    // Only a key with a budget of its own has an outlook (asking for another's is a 404 the console would log).
    const outlook = key.budget ? await api(`budgets/${encodeURIComponent(`key:${id}`)}`).catch(() => null) : null;
    $('title').textContent = `Key ${key.name}`;
    document.title = `Key ${key.name} · Switchyard`;
    const item = (name, value) => [h('dt', { text: name }), h('dd', {}, value)];
    const last = recent.data[0];
    const reasons = new Map();
    for (const r of refused.data) {
      const why = r.notes && r.notes.refused ? r.notes.refused.kind.replaceAll('_', ' ') : `answered ${r.status}`;
      reasons.set(why, (reasons.get(why) || 0) + 1);
    }
    const reset = key.budget ? nextWindow(key.budget.window) : null;
    show(h('p', {}, h('a', { href: '/ui/keys', text: '← All keys' })),
      h('dl', { class: 'detail' },
        item('Id', h('code', { text: key.id })), item('State', h('span', { class: `badge ${key.state}`, text: key.state })),
        item('Group', key.group || '–'), item('Pools', key.pools ? key.pools.join(', ') : 'all'),
        item('Last used (UTC)', last ? h('a', { href: `/ui/requests?id=${last.id}`, text: `${fmt.time(last.at_ms)} (${last.status})` }) : 'never'),
        item('Budget', key.budget || key.refusing ? keyBudget(key, key.usage ? key.usage.spent_usd : 0, `${key.name} budget used`) : 'no cap'),
        item('Budget resets (UTC)', reset ? fmt.time(reset) : '–'),
        item('Budget forecast', runsOut(outlook)),
        item('Requests per minute left', key.usage ? headroom(key.usage.requests_headroom, `${key.name} requests per minute left`) : '–'),
        item('Tokens per minute left', key.usage ? headroom(key.usage.tokens_headroom, `${key.name} tokens per minute left`) : '–'),
        item('In flight', key.usage ? fmt.n(key.usage.in_flight) : '–'),
        item('Expires', key.expires_at ? fmt.time(key.expires_at * 1000) : 'never'),
        item('Metadata', Object.keys(key.metadata || {}).length ? h('code', { text: JSON.stringify(key.metadata) }) : '–'),
        item('Refusals (latest 500 4xx)', reasons.size ? Array.from(reasons, ([why, n]) => `${why}: ${fmt.n(n)}`).join(' · ') : 'none')),
      seriesChart(`Spend of ${key.name} by model, last 7 days`, usage.starts, usage.series.map((line) => ({ label: line.value || '(none)', values: line.usd })), fmt.usd, usage.step_seconds),
      h('p', {}, h('a', { href: `/ui/requests?key=${encodeURIComponent(key.id)}`, text: 'Its requests →' })));
  }

  // A budget's forecast in words: "runs out in 6 h 10 m ($1.20 an hour)".
  function runsOut(outlook) {
    if (!outlook || outlook.burn_usd_per_hour == null) return '–';
    const pace = `${fmt.usd(outlook.burn_usd_per_hour)} an hour`;
    return outlook.runs_out_in ? `runs out in ${outlook.runs_out_in} (${pace})` : `lasts its window (${pace})`;
  }

  // When a budget window that is running now ends (UTC), in Unix ms.
  function nextWindow(window) {
    const now = new Date();
    const at = (y, m, d, hh) => Date.UTC(y, m, d, hh || 0);
    const [y, m, d, hh] = [now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), now.getUTCHours()];
    switch (window) {
      case '1m': return (Math.floor(Date.now() / 60000) + 1) * 60000;
      case '1h': return at(y, m, d, hh + 1);
      case '1d': return at(y, m, d + 1);
      case '7d': return at(y, m, d + ((8 - now.getUTCDay()) % 7 || 7));
      case '1mo': return at(y, m + 1, 1);
      default: return null;
    }
  }

  async function requestsPage() {
    if (!session.governance) return show(h('p', { class: 'note', text: 'Governance is off: there is no ledger of requests.' }));
    const params = new URLSearchParams(location.search);
    if (params.get('id')) return requestDetail(params.get('id'));
    const query = new URLSearchParams();
    for (const name of ['key', 'pool', 'lane', 'status', 'end_user', 'request_id', 'cursor']) if (params.get(name)) query.set(name, params.get(name));
    // A time range, read as UTC (the times shown are UTC).
    for (const name of ['from', 'to']) if (params.get(name)) query.set(name, `${params.get(name)}:00Z`);
    query.set('limit', '50');
    const filter = (name, label) => field(label, h('input', { name, value: params.get(name) || '', autocomplete: 'off' }));
    const status = params.get('status') || '';
    const form = h('form', { class: 'card filters', method: 'get', action: '/ui/requests', 'aria-label': 'Filter requests' },
      filter('key', 'Key (id or name)'), filter('end_user', 'End user'), filter('request_id', 'Request id'), filter('pool', 'Pool'), filter('lane', 'Lane'),
      field('From (UTC)', h('input', { name: 'from', type: 'datetime-local', value: params.get('from') || '' })),
      field('To (UTC)', h('input', { name: 'to', type: 'datetime-local', value: params.get('to') || '' })),
      field('Status', h('input', { name: 'status', value: status, list: 'status-classes', autocomplete: 'off', placeholder: '5xx, 429, …' })),
      h('datalist', { id: 'status-classes' }, ['2xx', '4xx', '5xx', '429', '499', '502', '503'].map((v) => h('option', { value: v }))),
      h('button', { type: 'submit', text: 'Filter' }));
    let page;
    try {
      page = await api(`requests?${query}`);
    } catch (err) {
      // A filter the API refuses keeps the form, with why.
      return show(form, h('p', { class: 'error', role: 'alert', text: `That filter does not work: ${err.message}` }));
    }
    const rows = page.data.map((r) => [
      h('a', { href: `/ui/requests?id=${r.id}`, text: fmt.time(r.at_ms) }),
      h('span', { class: `status s${Math.floor(r.status / 100)}`, text: r.status }),
      r.key_id || '–', r.end_user || '–', `${r.ingress || '–'}${r.stream ? ' · stream' : ''}`, operationOf(r), r.pool, r.lane || '–', fmt.n(r.input_tokens), fmt.n(r.output_tokens), fmt.usd(r.usd), fmt.wholeMs(r.latency_ms), fmt.n(r.failovers),
    ]);
    const more = [];
    if (page.next_cursor) {
      const next = new URLSearchParams(params);
      next.set('cursor', page.next_cursor);
      more.push(h('a', { href: `/ui/requests?${next}`, text: 'Older requests →' }));
    }
    show(form, table('Recent requests, newest first', ['Finished (UTC)', 'Status', 'Key', 'End user', 'Caller', 'Operation', 'Pool', 'Lane', 'In', 'Out', 'Cost', 'Time', 'Failovers'], rows, 'No requests match.'), h('p', {}, more));
  }

  // What a row did: its operation, a refusal's reason, a cache hit, the
  // guardrail decisions.
  function operationOf(r) {
    const notes = r.notes || {};
    if (notes.refused) return h('span', { class: 'badge refused', text: `refused: ${notes.refused.kind.replaceAll('_', ' ')} (${notes.refused.operation})` });
    const parts = [r.operation];
    if (notes.cache_saved_nano !== undefined) parts.push(' ', h('span', { class: 'badge closed', text: 'cache hit' }));
    if (notes.guardrails && notes.guardrails.length) parts.push(' ', h('span', { class: 'badge resting', text: `${notes.guardrails.length} guardrail` }));
    return h('span', {}, parts);
  }

  // A request's story in words: whether a provider was reached, who
  // answered (never a lane that failed), a refusal's reason, a cache hit,
  // the guardrail decisions.
  function whatHappened(r) {
    const notes = r.notes || {};
    const attempts = r.attempts || [];
    const refused = notes.refused || (r.operation === 'refused' ? { kind: 'refused', operation: '' } : null);
    const cached = notes.cache_saved_nano !== undefined && notes.cache_saved_nano !== null;
    const reached = !refused && !cached;
    const lastFailed = attempts.length ? Boolean(attempts[attempts.length - 1].failure) : r.status >= 500;
    const answered = reached && !lastFailed;
    const lines = [];
    if (refused) {
      const many = refused.count > 1 ? ` (this row stands for ${refused.count} alike in one minute)` : '';
      lines.push(`Refused before any provider was reached: ${refused.kind.replaceAll('_', ' ')}${refused.operation ? ` on a ${refused.operation} request` : ''}. The caller got ${r.status}${many}.`);
    } else if (cached) {
      lines.push(`Answered from the response cache, saving ${fmt.usd(notes.cache_saved_nano / 1e9)}: no provider was reached.`);
    } else if (!answered) {
      const tried = attempts.length || 1;
      lines.push(`Every attempt failed (${tried} tried${attempts.length ? `: ${attempts.map((a) => `${a.lane} ${(a.failure || '').replaceAll('_', ' ')}${a.status ? ` ${a.status}` : ''}`).join(', ')}` : `: ${r.lane}`}); no lane answered. The caller got ${r.status}.`);
      const last = attempts.length ? attempts[attempts.length - 1] : null;
      if (last && last.error) lines.push(`The last upstream said: ${last.error}`);
    } else if (r.failovers > 0) {
      lines.push(`${r.lane} answered ${r.status} after ${r.failovers} failed attempt${r.failovers === 1 ? '' : 's'} on other lanes.`);
    } else {
      lines.push(`${r.lane} answered ${r.status}${r.status >= 400 ? ' (the provider\'s own refusal, passed on)' : ''}.`);
    }
    for (const decision of notes.guardrails || []) {
      const [policy, rule, action, direction] = decision.split('/');
      lines.push(`Guardrail ${policy}${rule ? `, rule ${rule}` : ''}: ${action || 'acted'}${direction ? ` on the ${direction}` : ''}.`);
    }
    if (reached && !(notes.guardrails || []).length) lines.push('No guardrail acted on it.');
    return { reached, answered, lines };
  }

  async function requestDetail(id) {
    const r = await api(`requests/${encodeURIComponent(id)}`);
    const text = r.text || null;
    const item = (name, value) => [h('dt', { text: name }), h('dd', {}, value)];
    const story = whatHappened(r);
    $('title').textContent = `Request ${r.request_id}`;
    document.title = `Request ${r.request_id} · Switchyard`;
    show(h('p', {}, h('a', { href: '/ui/requests', text: '← All requests' })),
      h('section', { class: 'card why', 'aria-label': 'What happened' }, h('h2', { text: 'What happened' }),
        h('ul', {}, story.lines.map((line) => h('li', { text: line })))),
      h('dl', { class: 'detail' },
        item('Request id', h('code', { text: r.request_id })),
        item('Finished (UTC)', fmt.time(r.at_ms)),
        item('Status', String(r.status)),
        item('Key', r.key_id || '–'), item('Group', r.group || '–'), item('End user', r.end_user || '–'), item('Operation', r.operation),
        item('Caller', `${r.ingress || '–'}${r.stream ? ', a stream' : ''}`),
        item('Pool named', r.pool),
        item('Lane that answered', story.answered ? r.lane : h('span', { class: 'muted', text: story.reached ? `none (the last tried: ${r.lane})` : 'none: no provider was reached' })),
        item('Wire model', r.model),
        item('Lanes tried before it (failovers)', String(r.failovers)),
        item('Input tokens', fmt.n(r.input_tokens)), item('Output tokens', fmt.n(r.output_tokens)),
        item('Cache reads / writes', `${fmt.n(r.cache_read_tokens)} / ${fmt.n(r.cache_write_tokens)}`),
        item('Tokens estimated by the gateway', r.estimated ? 'yes (the caller left before usage came)' : 'no'),
        item('Cost at today\'s rate card', fmt.usd(r.usd)),
        item('Total time', fmt.wholeMs(r.latency_ms)), item('Time to first byte', fmt.wholeMs(r.ttfb_ms))),
      h('h2', { text: 'Attempts' }),
      r.attempts && r.attempts.length
        ? table('Upstream attempts in order', ['#', 'Lane', 'Status', 'Outcome', 'Time', 'What the upstream said'], r.attempts.map((a, i) => [
          String(i + 1), a.lane, a.status === null || a.status === undefined ? 'no answer' : String(a.status),
          a.failure ? h('span', { class: 'badge open', text: a.failure.replaceAll('_', ' ') }) : h('span', { class: 'badge closed', text: 'answered' }),
          fmt.wholeMs(a.ms), a.error ? h('code', { class: 'said', text: a.error }) : '–']))
        : h('p', { text: !story.reached ? 'No upstream attempt: no provider was reached.'
          : story.answered ? `One attempt: ${r.lane} answered ${r.status}.` : `One attempt: ${r.lane} failed; the caller got ${r.status}.` }),
      text ? [h('h2', { text: 'Prompt and reply' }),
        h('h3', { text: 'Request body' }), h('pre', { class: 'yaml', tabindex: '0', text: text.request || '(none kept)' }),
        h('h3', { text: 'Reply body' }), h('pre', { class: 'yaml', tabindex: '0', text: text.response || '(none kept: a stream, or not yet)' })]
        : h('p', { class: 'muted', text: 'Prompt and reply text are not kept for this request: they are kept in memory for the most recent requests only when telemetry.request_log.include_text is on.' }));
  }

  // One prompt, as a key, to a pool, in any caller dialect: the reply, the
  // lane, what the translation dropped, the time and the cost.
  async function playgroundPage() {
    const pools = await api('lanes');
    const names = pools.filter((p) => !p.implicit).map((p) => p.pool).concat(pools.filter((p) => p.implicit).map((p) => p.pool));
    const form = h('form', { class: 'card', 'aria-label': 'Send a prompt' },
      h('div', { class: 'fields' },
        field('Dialect', h('select', { name: 'dialect' }, [['openai', 'OpenAI Chat'], ['responses', 'OpenAI Responses'], ['anthropic', 'Anthropic Messages'], ['gemini', 'Gemini'], ['cohere', 'Cohere v2'], ['bedrock', 'Bedrock Converse']]
          .map(([value, text]) => h('option', { value, text })))),
        field('Pool or model', h('select', { name: 'pool' }, names.map((n) => h('option', { value: n, text: n })))),
        field('Key (its secret; empty on an open gateway)', h('input', { name: 'key', type: 'password', autocomplete: 'off' })),
        field('Most output tokens', h('input', { name: 'max_tokens', type: 'number', min: '1', value: '256' }))),
      field('Prompt', h('textarea', { name: 'prompt', rows: 5, required: true })),
      button('Send', null, { type: 'submit' }));
    const result = h('div', { id: 'playground-result', role: 'status' });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const body = { dialect: data.get('dialect'), pool: data.get('pool'), prompt: data.get('prompt'), max_tokens: numberOr(data.get('max_tokens')) };
      if (data.get('key')) body.key = data.get('key');
      result.replaceChildren(h('p', { class: 'muted', text: 'Sending…' }));
      try {
        const answer = await api('playground', { method: 'POST', json: body });
        const item = (name, value) => [h('dt', { text: name }), h('dd', {}, value)];
        result.replaceChildren(
          h('dl', { class: 'detail' },
            item('Status', h('span', { class: `status s${Math.floor(answer.status / 100)}`, text: answer.status })),
            item('Lane that answered', answer.lane || '–'),
            item('Dropped in translation', answer.dropped || 'nothing'),
            item('Time', fmt.wholeMs(answer.took_ms)),
            item('Tokens in / out', `${fmt.n(answer.input_tokens)} / ${fmt.n(answer.output_tokens)}`),
            item('Cost at today\'s rate card', answer.usd === null || answer.usd === undefined ? '–' : fmt.usd(answer.usd)),
            item('Request id', answer.request_id ? h('a', { href: `/ui/requests?request_id=${encodeURIComponent(answer.request_id)}`, text: answer.request_id }) : '–')),
          h('h3', { text: answer.error ? 'Error' : 'Reply' }),
          h('pre', { class: 'yaml reply', tabindex: '0', text: answer.error || answer.text || '' }),
          h('details', {}, h('summary', { text: 'The request as sent' }), h('pre', { class: 'yaml', tabindex: '0', text: answer.request })));
      } catch (err) {
        result.replaceChildren(h('p', { class: 'error', text: `Not sent: ${err.message}` }));
      }
    });
    show(canChange() ? form : readOnly('prompts'), result);
  }

  // What an audit entry's action did, in words, and its changes before
  // and after (the API notes them as `field: before -> after; ...`).
  const AUDITED = [
    ['POST', /^\/api\/v1\/admin\/keys$/, 'Created a key'],
    ['PATCH', /^\/api\/v1\/admin\/keys\/[^/]+$/, 'Changed a key'],
    ['DELETE', /^\/api\/v1\/admin\/keys\/[^/]+$/, 'Revoked a key'],
    ['POST', /^\/api\/v1\/admin\/keys\/[^/]+\/rotate$/, 'Rotated a key'],
    ['DELETE', /^\/api\/v1\/admin\/keys\/[^/]+\/suspension$/, 'Lifted a key\'s suspension'],
    ['PUT', /\/end-users\//, 'Set an end user\'s policy'],
    ['DELETE', /\/end-users\//, 'Removed an end user\'s policy'],
    ['POST', /^\/api\/v1\/admin\/groups$/, 'Created a group'],
    ['PATCH', /^\/api\/v1\/admin\/groups\/[^/]+$/, 'Changed a group'],
    ['DELETE', /^\/api\/v1\/admin\/groups\/[^/]+$/, 'Deleted a group'],
    ['PATCH', /^\/api\/v1\/admin\/lanes\//, 'Changed a lane'],
    ['POST', /^\/api\/v1\/admin\/lanes\/.*\/reset$/, 'Reset a lane\'s breaker'],
    ['POST', /^\/api\/v1\/admin\/config$/, 'Applied a config version'],
    ['POST', /^\/api\/v1\/admin\/config\/rollback\//, 'Rolled the config back'],
    ['POST', /^\/api\/v1\/admin\/config\/reload$/, 'Reloaded the config file'],
    ['POST', /^\/api\/v1\/admin\/config\/validate$/, 'Checked a candidate config'],
    ['POST', /^\/api\/v1\/admin\/alerts\/silences$/, 'Silenced an alert'],
    ['DELETE', /^\/api\/v1\/admin\/alerts\/silences$/, 'Ended an alert\'s silence'],
    ['POST', /^\/api\/v1\/admin\/mcp\/tools\/[^/]+\/approval$/, 'Approved an MCP tool'],
    ['DELETE', /^\/api\/v1\/admin\/mcp\/tools\/[^/]+\/approval$/, 'Unpinned an MCP tool'],
    ['POST', /^\/api\/v1\/admin\/runs\/[^/]+\/kill$/, 'Killed an agent run'],
    ['POST', /^\/api\/v1\/admin\/playground$/, 'Sent a playground prompt'],
    ['DELETE', /^\/api\/v1\/admin\/users\/[^/]+\/content$/, 'Erased an end user\'s content'],
    ['POST', /^\/api\/v1\/self\/keys$/, 'Minted an own key'],
    ['POST', /^\/api\/v1\/self\/keys\/[^/]+\/rotate$/, 'Rotated an own key'],
    ['DELETE', /^\/api\/v1\/self\/keys\/[^/]+$/, 'Revoked an own key'],
    ['POST', /^\/ui\/login$/, 'Signed in to the console'],
    ['GET', /^\/ui\/oidc\/callback/, 'Signed in through single sign-on'],
  ];

  function auditAction(action) {
    const match = /^([A-Z]+) (\S+)(?: \((.*)\))?$/s.exec(action || '');
    if (!match) return { what: action || '–', changes: [], raw: action };
    const [, method, path, note] = match;
    const known = AUDITED.find(([m, pattern]) => m === method && pattern.test(path.split('?')[0]));
    const changes = note ? note.split('; ').map((c) => c.replaceAll(' -> ', ' → ')) : [];
    return { what: known ? known[2] : `${method} ${path}`, changes, raw: action };
  }

  async function alertsPage() {
    const params = new URLSearchParams(location.search);
    const [alerts, audit, drift] = await Promise.all([api('alerts'), session.governance ? api('audit?limit=200') : { data: [] },
      // Reconciliation is the gateway's, not a tenant's: its admins are not shown it.
      tenant() ? { configured: false } : api('reconciliation')]);
    const parts = [];
    // Alerts are raised and listed here with or without a receiver.
    if (!alerts.configured) {
      parts.push(h('p', { class: 'note', text: 'No alerts receiver: these alerts are listed here and sent nowhere. Set alerts.webhook in the config to be told when something needs a person.' }));
    }
    parts.push(h('h2', { text: 'Firing now' }),
      table('Alerts firing now', ['Kind', 'Subject', 'What happened', 'Since', 'Silenced'],
        alerts.open.map((a) => [a.kind.replaceAll('_', ' '), a.subject, a.detail, fmt.ago(a.at), silenceOf(a, true)]), 'Nothing is firing.'));
    if (alerts.configured) {
      parts.push(h('h2', { text: 'Sent so far' }),
        table('Alerts by kind since the gateway started', ['Kind', 'Sent', 'Deduplicated', 'Silenced', 'Dropped (queue full)', 'Failed (receiver)'],
          alerts.counts.filter((c) => c.sent || c.deduplicated || c.silenced || c.dropped || c.failed)
            .map((c) => [c.kind.replaceAll('_', ' '), fmt.n(c.sent), fmt.n(c.deduplicated), fmt.n(c.silenced || 0), fmt.n(c.dropped), fmt.n(c.failed)]), 'No alert sent yet.'));
    }
    if (drift.configured) {
      const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(2)}%`;
      parts.push(h('h2', { text: 'Reconciliation' }),
        h('p', { class: 'note', text: `The providers' own usage and cost reports against the ledger's tokens and their cost at the rate card, per model and day; a drift of either past ${(drift.tolerance * 100).toFixed(2)}% alerts once.` }),
        table('Ledger against provider reports, by provider, model and day', ['Day (UTC)', 'Provider', 'Model', 'Ledger tokens', 'Reported tokens', 'Drift', 'Ledger cost', 'Billed cost', 'Cost drift'],
          drift.lines.slice().reverse().map((l) => [l.day, l.provider, l.model, fmt.n(l.ledger_tokens), fmt.n(l.reported_tokens),
            h('span', { class: l.over ? 'status s5' : 'status s2', text: pct(l.drift) }),
            fmt.usd(l.ledger_usd), fmt.usd(l.provider_usd),
            l.cost_drift === null || l.cost_drift === undefined ? '–' : h('span', { class: l.cost_over ? 'status s5' : 'status s2', text: pct(l.cost_drift) })]),
          'No report read yet.'),
        table('Each provider\'s last run', ['Provider', 'Last run (UTC)', 'Runs', 'Failed', 'Last error', 'Cost report', 'Cost rows left out'],
          drift.runs.map((r) => {
            const skipped = r.skipped ? Object.entries(r.skipped).filter(([, n]) => n > 0) : [];
            return [r.provider, fmt.time(r.at), fmt.n(r.runs), fmt.n(r.failures), r.error || '–', r.cost_error || (r.error ? '–' : 'read'),
              skipped.length ? skipped.map(([why, n]) => `${fmt.n(n)} ${why}`).join(', ') : '–'];
          }), 'Not run yet.'));
    }
    const actor = params.get('actor') || '';
    const outcome = params.get('outcome') || '';
    const form = h('form', { class: 'card filters', method: 'get', action: '/ui/alerts', 'aria-label': 'Filter the audit log' },
      field('Who', h('input', { name: 'actor', value: actor, autocomplete: 'off' })),
      field('Outcome', h('select', { name: 'outcome' }, [['', 'any'], ['2xx', 'done (2xx)'], ['4xx', 'refused (4xx)'], ['5xx', 'failed (5xx)']]
        .map(([value, text]) => h('option', { value, text, selected: value === outcome })))),
      h('button', { type: 'submit', text: 'Filter' }));
    const entries = audit.data.filter((e) => (!actor || e.actor.includes(actor)) && (!outcome || String(e.outcome)[0] === outcome[0]));
    parts.push(h('h2', { text: 'Audit log' }), form,
      table('Admin changes and attempts, newest first', ['When', 'Who', 'What', 'Target', 'Before → after', 'Outcome'],
        entries.map((e) => {
          const { what, changes, raw } = auditAction(e.action);
          return [fmt.ago(e.at_ms), e.actor, h('span', { title: raw, text: what }), e.target || '–',
            changes.length ? h('ul', { class: 'changes' }, changes.map((c) => h('li', { text: c }))) : '–',
            h('span', { class: `status s${Math.floor(e.outcome / 100)}`, text: `${e.outcome < 400 ? 'done' : e.outcome < 500 ? 'refused' : 'failed'} (${e.outcome})` })];
        }),
        'No entries match.'));
    show(parts);
  }

  // The MCP gateway: its servers, every tool with its schema digest and
  // pin (approve, re-approve after a change, unpin), and recent calls.
  async function mcpPage() {
    const [overview, calls] = await Promise.all([
      api('mcp'),
      session.governance ? api('requests?operation=mcp&limit=50') : { data: [] },
    ]);
    if (!overview.configured) {
      return show(h('p', { class: 'note', text: 'No MCP servers: add mcp.servers to the config to front tool servers at /mcp.' }));
    }
    const state = (s) => {
      if (!s.state) return '–';
      if (s.state.quarantined_for_s) return h('span', { class: 'badge open', text: `quarantined ${s.state.quarantined_for_s} s` });
      if (s.state.pid) return h('span', { class: 'badge closed', text: `running (pid ${s.state.pid})` });
      return s.state.last_error ? shortReason(s.state.last_error) : 'starts on first use';
    };
    const servers = table('MCP servers', ['Server', 'Transport', 'Target', 'Pool', 'State', 'Idempotent tools', 'Price per call'],
      overview.servers.map((s) => [s.name, s.transport, h('code', { text: s.target }), s.pool || '–', state(s),
        s.idempotent.length ? s.idempotent.join(', ') : '–',
        s.price_per_call_usd === null || s.price_per_call_usd === undefined ? '–' : fmt.usd(s.price_per_call_usd)]), 'No servers.');
    const standing = { approved: 'closed', unreviewed: 'resting', changed: 'open' };
    const pin = (tool, approve) => button(approve ? (tool.standing === 'changed' ? 'Approve the new schema' : 'Approve') : 'Unpin', async () => {
      try {
        const path = `mcp/tools/${encodeURIComponent(tool.name)}/approval`;
        await api(path, approve ? { method: 'POST', json: {} } : { method: 'DELETE' });
        say(approve ? `${tool.name} is pinned to its schema now.` : `${tool.name} is no longer pinned.`, 'ok');
        await render();
      } catch (err) { say(`Not changed: ${err.message}`, 'error'); }
    }, { 'aria-label': `${approve ? 'Approve' : 'Unpin'} ${tool.name}` });
    const tools = table('MCP tools, as their servers list them now', ['Tool', 'Standing', 'Callers see it', 'Schema digest', 'Approved digest', 'Approval'],
      overview.tools.map((t) => [h('code', { text: t.name }), h('span', { class: `badge ${standing[t.standing]}`, text: t.standing }),
        t.listed ? 'yes' : 'withheld', h('code', { text: t.digest.slice(0, 12), title: t.digest }),
        t.approved_digest ? h('code', { text: t.approved_digest.slice(0, 12), title: t.approved_digest }) : '–',
        h('span', { class: 'actions' }, t.standing === 'approved' ? null : pin(t, true), t.approved_digest ? pin(t, false) : null)]), 'No tools listed.');
    const errors = Object.entries(overview.errors || {});
    show(h('section', {}, h('h2', { text: 'Servers' }), servers),
      h('section', {}, h('h2', { text: 'Tools and approvals' }),
        h('p', { class: 'muted', text: overview.require_approval
          ? 'A tool is callable once approved; a tool whose schema changed since is withheld until approved again.'
          : 'Approving a tool pins its schema: if its server changes it, the tool is withheld and an alert goes out until it is approved again.' }),
        errors.length ? h('ul', { class: 'problems' }, errors.map(([name, why]) => h('li', {}, h('code', { text: name }), `: ${why}`))) : null,
        tools),
      h('section', {}, h('h2', { text: 'Recent tool calls' }),
        table('MCP tool calls, newest first', ['When (UTC)', 'Key', 'Tool', 'Server', 'Status', 'Time', 'Bytes in / out', 'Cost'],
          calls.data.map((r) => [fmt.time(r.at_ms), r.key_id || '–', h('code', { text: r.model }), (r.notes.tool || {}).server || '–',
            h('span', { class: `status s${Math.floor(r.status / 100)}`, text: r.status }), fmt.wholeMs(r.latency_ms),
            `${fmt.n((r.notes.tool || {}).bytes_in || 0)} / ${fmt.n((r.notes.tool || {}).bytes_out || 0)}`, fmt.usd(r.usd)]),
          'No tool calls yet.')));
  }

  // A line diff of two texts: each line kept, removed (-) or added (+).
  function lineDiff(before, after) {
    const a = before.split('\n'), b = after.split('\n');
    // Common head and tail first: a config edit is usually small.
    let head = 0;
    while (head < a.length && head < b.length && a[head] === b[head]) head += 1;
    let tail = 0;
    while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail += 1;
    const x = a.slice(head, a.length - tail), y = b.slice(head, b.length - tail);
    if (x.length * y.length > 4000000) return [...x.map((l) => `- ${l}`), ...y.map((l) => `+ ${l}`)];
    const lcs = Array.from({ length: x.length + 1 }, () => new Uint16Array(y.length + 1));
    for (let i = x.length - 1; i >= 0; i -= 1) {
      for (let j = y.length - 1; j >= 0; j -= 1) lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
    const out = [];
    let i = 0, j = 0;
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) { out.push(`  ${x[i]}`); i += 1; j += 1; }
      else if (j < y.length && (i === x.length || lcs[i][j + 1] >= lcs[i + 1][j])) { out.push(`+ ${y[j]}`); j += 1; }
      else { out.push(`- ${x[i]}`); i += 1; }
    }
    return out;
  }

  function diffView(lines, label) {
    if (!lines.some((l) => l[0] === '+' || l[0] === '-')) return h('p', { class: 'muted', text: 'No difference.' });
    return h('pre', { class: 'yaml diff', tabindex: '0', 'aria-label': label },
      lines.map((l) => h('span', { class: l[0] === '+' ? 'added' : l[0] === '-' ? 'removed' : '', text: `${l}\n` })));
  }

  async function configPage() {
    const [running, versions] = await Promise.all([
      api('config'),
      session.governance ? api('config/versions?limit=50').catch(() => []) : [],
    ]);
    const candidate = h('textarea', { id: 'candidate', rows: 14, spellcheck: 'false', 'aria-label': 'Candidate config (YAML)' });
    const message = h('input', { id: 'change-message', autocomplete: 'off', 'aria-label': 'Why (kept with the version)' });
    const result = h('div', { id: 'config-result', role: 'status' });
    const problems = (list) => h('ul', { class: 'problems' }, list.map((p) => h('li', {}, h('code', { text: p.path || '(file)' }), `: ${p.message}`, p.fix ? h('span', { class: 'muted', text: ` — ${p.fix}` }) : null)));
    const load = h('button', { type: 'button', text: 'Load the running config' });
    load.addEventListener('click', () => {
      candidate.value = running.yaml;
      result.replaceChildren(h('p', { class: 'muted', text: 'The running config is in the editor, comments and all. Each secret shows as <redacted>: left where it is, it keeps the running secret; to change one, write the new secret or a ${VARIABLE} in its place.' }));
    });
    const empty = () => !candidate.value.split('\n').some((line) => line.trim() && !line.trim().startsWith('#'));
    const compare = h('button', { type: 'button', text: 'Diff against the running config' });
    compare.addEventListener('click', () => result.replaceChildren(h('h3', { text: 'Candidate against the running config' }), diffView(lineDiff(running.yaml, candidate.value), 'Candidate against the running config')));
    const kept = (n) => n ? ` ${n} secret${n === 1 ? '' : 's'} shown as <redacted> keep${n === 1 ? 's' : ''} the running value.` : '';
    const validate = button('Validate candidate', async () => {
      if (empty()) return result.replaceChildren(h('p', { class: 'error', text: 'The candidate is empty: load the running config and edit it.' }));
      try {
        const answer = await api('config/validate', { method: 'POST', body: candidate.value, headers: { 'content-type': 'application/yaml' } });
        result.replaceChildren(answer.valid ? h('p', { class: 'ok', text: `The candidate is valid.${kept(answer.kept_secrets)}` }) : h('p', { class: 'error', text: 'The candidate has problems:' }),
          answer.valid ? '' : problems(answer.problems), answer.warnings.length ? problems(answer.warnings) : '');
      } catch (err) { result.replaceChildren(h('p', { class: 'error', text: err.message })); }
    });
    const apply = button('Apply as a new version', async () => {
      if (running.version === null || running.version === undefined) return say('Versions need governance (admin tokens or storage).', 'error');
      if (empty()) return result.replaceChildren(h('p', { class: 'error', text: 'The candidate is empty: load the running config and edit it.' }));
      if (!confirm(`Apply the candidate as version ${running.version + 1}? It is written to the config file and served at once.`)) return;
      try {
        const answer = await api('config', { method: 'POST', json: { yaml: candidate.value, message: message.value }, headers: { 'if-match': `"${running.version}"` } });
        say(`Version ${answer.version} applied: ${answer.pools} pools, ${answer.lanes} lanes.`, 'ok');
        await render();
      } catch (err) {
        result.replaceChildren(h('p', { class: 'error', text: `Not applied: ${err.message}` }));
      }
    }, { disabled: !canChange() || running.locked, title: running.locked ? 'config.locked: the file is the source' : null });
    const reload = button('Reload the config file', async () => {
      if (!confirm('Read the config file on disk again and serve it now?')) return;
      try {
        const answer = await api('config/reload', { method: 'POST' });
        const o = answer.outcome;
        result.replaceChildren(h('p', { class: 'ok', text: `Reloaded: ${o.pools} pools, ${o.lanes} lanes.${o.restart_required.length ? ` Needs a restart to change: ${o.restart_required.join(', ')}.` : ''}` }));
      } catch (err) {
        result.replaceChildren(h('p', { class: 'error', text: `Refused, the running config keeps serving: ${err.message}` }), err.body && err.body.error && err.body.error.problems ? problems(err.body.error.problems) : '');
      }
    });
    const history = versions.length ? table('Config versions, newest first', ['Version', 'When (UTC)', 'Who', 'Why', 'Changes', 'Actions'], versions.map((v) => {
      const changes = h('details', {}, h('summary', { text: `Changes in version ${v.version}` }), h('div', { class: 'diff-slot' }));
      changes.addEventListener('toggle', async () => {
        if (!changes.open || changes.dataset.loaded) return;
        changes.dataset.loaded = 'true';
        const detail = await api(`config/versions/${v.version}`);
        changes.querySelector('.diff-slot').replaceChildren(h('pre', { class: 'yaml diff', tabindex: '0', 'aria-label': `Diff of version ${v.version}` },
          detail.diff.split('\n').map((l) => h('span', { class: l.startsWith('+') && !l.startsWith('+++') ? 'added' : l.startsWith('-') && !l.startsWith('---') ? 'removed' : '', text: `${l}\n` }))));
      });
      return [String(v.version) + (v.current ? ' (serving)' : ''), fmt.time(v.at_ms), v.author, v.message || '–', changes,
        v.current ? '' : button('Roll back to this', async () => {
          if (!confirm(`Apply version ${v.version}'s text as a new version?`)) return;
          try {
            const answer = await api(`config/rollback/${v.version}`, { method: 'POST', json: {}, headers: { 'if-match': `"${running.version}"` } });
            say(`Rolled back: version ${answer.version} is version ${v.version}'s text.`, 'ok');
            await render();
          } catch (err) { say(`Could not roll back: ${err.message}`, 'error'); }
        }, { 'aria-label': `Roll back to version ${v.version}`, disabled: !canChange() || running.locked })];
    }), 'No versions yet.') : null;
    show(!canChange() ? readOnly('the config and its versions') : h('section', { class: 'card' }, h('h2', { text: 'Change the config' }),
      h('p', { class: 'muted', text: running.locked
        ? 'The config is locked (config.locked): the file is the source. Check a candidate here; change the file and reload to apply it.'
        : 'Check a candidate as `switchyard check` would, see what it changes, and apply it as a new version (written to the file, served at once, on every instance of a fleet). Reload reads the file on disk again, as SIGHUP does.' }),
      candidate, field('Why (kept with the version)', message),
      h('p', { class: 'actions' }, load, compare, validate, apply, reload), result),
    history ? h('section', {}, h('h2', { text: `Versions${running.version ? ` (serving version ${running.version})` : ''}` }), history) : null,
    h('section', {}, h('h2', { text: 'Running config (secrets redacted)' }),
      running.restart_pending && running.restart_pending.length
        ? h('p', { class: 'note', text: `The file below changes ${running.restart_pending.join(', ')}; these keep their running values until a restart.` })
        : null,
      h('pre', { class: 'yaml', tabindex: '0', text: running.yaml })));
  }

  const PAGES = {
    '': ['Overview', overview, true],
    pools: ['Pools & lanes', poolsPage, true],
    keys: ['Keys', keysPage, false],
    groups: ['Groups', groupsPage, false],
    spend: ['Spend', spendPage, false],
    usage: ['Usage over time', usagePage, false],
    requests: ['Requests', requestsPage, false],
    alerts: ['Alerts & audit', alertsPage, true],
    mcp: ['MCP tools', mcpPage, false],
    playground: ['Playground', playgroundPage, false],
    config: ['Config', configPage, false],
    'my-keys': ['My keys', myKeysPage, false],
  };

  // What views.js (the views of wave 4's surfaces: budgets, reconciliation,
  // sockets and pins) draws with: it adds its pages before the page starts.
  window.switchyardConsole = {
    h, api, show, say, table, field, meter, fmt, isoDate, tenant, pages: PAGES, tenantHidden: TENANT_HIDDEN,
    button, canChange, readOnly, render: () => render(),
    session: () => session,
  };

  const pageName = () => location.pathname.replace(/^\/ui\/?/, '').replace(/\/$/, '');

  function notFound() {
    show(h('p', { text: `There is no console page at ${location.pathname}.` }),
      h('ul', {}, Object.entries(PAGES).map(([name, [title]]) => h('li', {}, h('a', { href: `/ui/${name}`, text: title })))));
  }

  // True while a field of the page has the keyboard focus.
  function editing() {
    const active = document.activeElement;
    return Boolean(active && $('content').contains(active) && ['INPUT', 'TEXTAREA', 'SELECT'].includes(active.tagName));
  }

  // A section's name: its summary's accessible name, else its text.
  const summaryName = (summary) => summary.getAttribute('aria-label') || summary.textContent;

  // What a redraw must keep: the element that has the keyboard focus (by
  // its id or accessible name) and which sections are open.
  function remembered() {
    const active = document.activeElement;
    const focus = active && active !== document.body && $('content').contains(active)
      ? { id: active.id, label: active.getAttribute('aria-label'), text: active.textContent, tag: active.tagName }
      : null;
    const open = Array.from($('content').querySelectorAll('details[open] > summary'), summaryName);
    return { focus, open };
  }

  function restore({ focus, open }) {
    for (const summary of $('content').querySelectorAll('details > summary')) {
      if (open.includes(summaryName(summary))) summary.parentElement.open = true;
    }
    if (!focus) return;
    const candidates = $('content').querySelectorAll(focus.tag);
    const again = Array.from(candidates).find((node) => (focus.id && node.id === focus.id)
      || (focus.label && node.getAttribute('aria-label') === focus.label)
      || (!focus.id && !focus.label && node.textContent === focus.text));
    if (again) again.focus({ preventScroll: true });
  }

  async function render() {
    const [title, draw] = PAGES[pageName()] || ['Not found', notFound];
    if (!$('title').dataset.fixed) $('title').textContent = title;
    document.title = `${$('title').textContent} · Switchyard`;
    const kept = remembered();
    try {
      await draw();
      restore(kept);
      if (!document.body.dataset.ready) performance.mark('switchyard-ready');
      document.body.dataset.ready = 'true';
    } catch (err) {
      if (err.message !== 'signed out') say(`Could not load: ${err.message}`, 'error');
    }
  }

  async function start() {
    // The document carries who is signed in (it is served only to a session).
    session = JSON.parse(document.querySelector('meta[name="switchyard-session"]').content);
    const role = { full: 'full access', read: 'read-only', read_text: 'read-only, kept text too', member: 'member' }[session.scope] || session.scope;
    $('who').textContent = tenant() ? `${session.name} (${role}, group ${tenant()})` : `${session.name} (${role})`;
    if (tenant()) {
      // What only the gateway's admin may do is not offered.
      for (const link of document.querySelectorAll('nav a')) {
        if (TENANT_HIDDEN.includes(link.dataset.page)) link.parentElement.remove();
      }
      if (TENANT_HIDDEN.includes(pageName())) return location.replace('/ui/');
    }
    if (session.scope === 'member') {
      // A member has their own keys and nothing else.
      document.querySelector('nav ul').replaceChildren(h('li', {}, h('a', { href: '/ui/my-keys', 'data-page': 'my-keys', text: 'My keys' })));
      if (pageName() !== 'my-keys') return location.replace('/ui/my-keys');
    }
    for (const link of document.querySelectorAll('nav a')) {
      if (link.dataset.page === pageName()) link.setAttribute('aria-current', 'page');
    }
    // Escape closes an open edit panel and gives the focus back to its summary.
    document.addEventListener('keydown', (event) => {
      if (event.key !== 'Escape') return;
      const open = document.querySelector('details.edit[open]');
      if (!open) return;
      open.open = false;
      open.querySelector('summary').focus();
    });
    $('logout').addEventListener('click', async () => {
      await fetch('/ui/logout', { method: 'POST', headers: { 'x-csrf-token': session.csrf } });
      location.assign('/ui/login?ended=1');
    });
    await render();
    // Live pages redraw every 5 seconds while visible, and pause while a
    // field has the focus (a redraw would erase what is being typed).
    const live = (PAGES[pageName()] || [])[2];
    if (live) {
      refreshTimer = setInterval(() => {
        const paused = editing();
        document.body.dataset.paused = String(paused);
        if (!document.hidden && !paused) render();
      }, 5000);
    }
  }

  document.addEventListener('DOMContentLoaded', start);
  window.addEventListener('pagehide', () => clearInterval(refreshTimer));
})();
