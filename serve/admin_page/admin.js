// The operator page: reads /admin/api/... and /admin/audit with the operator's token (kept
// in sessionStorage for this tab only) and refreshes every few seconds. Every value goes
// into the page as text (textContent), never as HTML.
'use strict';

const TOKEN_KEY = 'mcpcell.operatorToken';
const REFRESH_MS = 2000;
let timer = null;

const $ = (id) => document.getElementById(id);

function setStatus(text) {
  $('status').textContent = text;
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

async function api(path, options = {}) {
  const res = await fetch(path, {
    ...options,
    headers: { Authorization: 'Bearer ' + token() },
    cache: 'no-store',
  });
  const text = await res.text();
  if (!res.ok) {
    let message = text;
    try {
      message = JSON.parse(text).error || text;
    } catch (e) {
      // not JSON: the text as it is
    }
    const error = new Error(message.trim());
    error.status = res.status;
    throw error;
  }
  return text;
}

function cell(row, value, className) {
  const td = document.createElement('td');
  td.textContent = value === undefined || value === null ? '' : String(value);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function fill(tableId, items, addRow) {
  const body = $(tableId).querySelector('tbody');
  const rows = items.map((item) => {
    const tr = document.createElement('tr');
    addRow(tr, item);
    return tr;
  });
  body.replaceChildren(...rows);
}

function age(seconds) {
  const s = Math.floor(seconds);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

function tenantName(tenant) {
  return tenant === '' ? '(server policy)' : tenant;
}

async function act(id, action) {
  try {
    const answer = JSON.parse(
      await api('/admin/api/sessions/' + encodeURIComponent(id) + '/' + action, { method: 'POST' }));
    setStatus(answer.message);
  } catch (e) {
    setStatus(action + ' ' + id + ': ' + e.message);
  }
  refresh();
}

function sessionRow(tr, s) {
  tr.dataset.session = s.id;
  tr.className = 'state-' + s.state;
  const usage = s.usage || {};
  const calls = Object.values(usage.calls_by_tool || {}).reduce((a, b) => a + b, 0);
  cell(tr, tenantName(s.tenant));
  cell(tr, s.id, 'session-id');
  cell(tr, age(s.age_s), 'num');
  const state = cell(tr, s.state, 'state');
  // A hold names its operator: calls stay refused until an operator resumes the session.
  if (s.held_by) state.title = 'held by operator ' + s.held_by + ' since ' + s.held_since;
  cell(tr, s.policy);
  cell(tr, (usage.cpu_s || 0).toFixed(3), 'num cpu');
  cell(tr, (usage.memory_gib_s || 0).toFixed(4), 'num');
  cell(tr, (usage.egress_up_bytes || 0) + (usage.egress_down_bytes || 0), 'num');
  cell(tr, calls, 'num calls');
  const actions = cell(tr, '');
  for (const action of ['pause', 'resume', 'end']) {
    const button = document.createElement('button');
    button.type = 'button';
    button.textContent = action;
    button.className = 'action-' + action;
    button.addEventListener('click', () => act(s.id, action));
    actions.appendChild(button);
  }
}

async function refreshLive() {
  const sessions = JSON.parse(await api('/admin/api/sessions')).sessions;
  fill('sessions', sessions, sessionRow);
  const pools = JSON.parse(await api('/admin/api/pool')).pools;
  fill('pools', pools, (tr, p) => {
    cell(tr, tenantName(p.tenant));
    cell(tr, p.target, 'num');
    cell(tr, p.ready, 'num');
    cell(tr, p.parked, 'num');
    cell(tr, p.status || 'ok');
  });
  const refusals = JSON.parse(await api('/admin/api/egress?limit=50')).refusals;
  fill('egress', refusals.reverse(), (tr, r) => {
    cell(tr, r.time);
    cell(tr, tenantName(r.tenant || ''));
    cell(tr, r.session);
    cell(tr, r.host);
    cell(tr, r.port);
    cell(tr, r.reason);
  });
}

// The newest records first (order=desc): the trail is read from its newest file back, so
// a long trail costs only what the page shows; `since` and `until` narrow it further.
function auditQuery() {
  const params = new URLSearchParams();
  for (const name of ['tenant', 'session', 'type', 'since', 'limit']) {
    const value = $('f-' + name).value.trim();
    if (value !== '') params.set(name, value);
  }
  params.set('order', 'desc');
  return params.toString();
}

async function refreshAudit() {
  const text = await api('/admin/audit?' + auditQuery());
  const records = text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line));
  const own = new Set(['seq', 'time', 'type', 'tenant', 'session', 'prev', 'hash', 'server']);
  fill('audit', records, (tr, r) => {
    cell(tr, r.seq, 'num');
    cell(tr, r.time);
    cell(tr, r.type, 'type');
    cell(tr, tenantName(r.tenant || ''));
    cell(tr, r.session);
    const details = {};
    for (const [key, value] of Object.entries(r)) {
      if (!own.has(key)) details[key] = value;
    }
    cell(tr, JSON.stringify(details), 'details');
  });
}

async function refresh() {
  if (!token()) return;
  try {
    await refreshLive();
    await refreshAudit();
  } catch (e) {
    setStatus(e.message);
    if (e.status === 401) logout();
  }
}

async function login() {
  const typed = $('token').value.trim();
  if (typed === '') {
    setStatus('Type an operator token.');
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, typed);
  await start();
}

async function start() {
  try {
    const me = JSON.parse(await api('/admin/api/whoami'));
    const scope = me.all_tenants ? 'all tenants' : 'tenants ' + me.tenants.join(', ');
    $('who').textContent = 'operator ' + me.operator + ' (' + scope + ')';
  } catch (e) {
    sessionStorage.removeItem(TOKEN_KEY);
    setStatus('Log in refused: ' + e.message);
    return;
  }
  setStatus('');
  $('token').value = '';
  $('login-button').hidden = true;
  $('logout-button').hidden = false;
  $('data').hidden = false;
  await refresh();
  if (timer === null) timer = setInterval(refresh, REFRESH_MS);
}

function logout() {
  sessionStorage.removeItem(TOKEN_KEY);
  if (timer !== null) clearInterval(timer);
  timer = null;
  $('who').textContent = '';
  $('login-button').hidden = false;
  $('logout-button').hidden = true;
  $('data').hidden = true;
}

document.addEventListener('DOMContentLoaded', () => {
  $('login-button').addEventListener('click', login);
  $('token').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') login();
  });
  $('logout-button').addEventListener('click', logout);
  $('audit-apply').addEventListener('click', () => refresh());
  if (token()) start();
});
