// Capture: its mode (what writes memories), the queue, the latest passes
// and what each wrote (and took in model tokens), the failed triggers with
// their errors and a retry, the model usage and daily budgets, and the
// numbers of /stats. In agent-driven mode (no classifier) the agent
// writes: its latest writes take the place of the queue and the passes,
// and the classifier's budgets are left out.

import { get, post } from './api.js';
import {
  clip, h, memoryLink, namespaceOf, num, shortId, time, when,
} from './dom.js';

/** How many of the agent's latest writes are shown. */
const AGENT_WRITES = 20;
import { notify } from './dialogs.js';

/** Renders the capture page. */
export async function captureView() {
  const [triggers, stats] = await Promise.all([get('/triggers?limit=50'), get('/stats')]);
  const agentDriven = triggers.mode === 'agent';
  return h('section', { class: 'capture' },
    h('h1', { tabindex: '-1' }, 'Capture'),
    h('p', { id: 'capture-mode', class: 'capture-mode', 'data-mode': triggers.mode },
      h('strong', null, agentDriven ? 'Agent-driven capture. ' : 'Classifier capture. '), triggers.mode_summary),
    h('div', { class: 'actions' }, h('a', { class: 'button quiet', href: `#/capture?t=${Date.now()}` }, 'Refresh')),
    agentDriven ? await agentWrites() : classifierSections(triggers),
    !agentDriven || triggers.failed.length ? failedSection(triggers) : null,
    stats.models ? usageSection(stats.models, agentDriven) : null,
    statsSection(stats));
}

/** The agent's latest writes: the newest memories written on request
 * (the MCP `remember` tool, `remember:` prompts, the API), not by a pass. */
async function agentWrites() {
  const page = await get(`/memories?limit=${AGENT_WRITES}`);
  const written = page.memories.filter((m) => m.trigger === 'manual');
  return section('Latest agent writes', 'agent-writes', written, ['memory', 'owner', 'category', 'written'], (m) => [
    memoryLink(m.id, clip(m.content, 120)), namespaceOf(m), m.category, time(m.created_at),
  ], 'No memory written by an agent yet: it writes with the MCP tool `remember` (or a `remember:` prompt).');
}

/** The queue and the latest passes of the classifier. */
function classifierSections(triggers) {
  return [
    section('Queue', 'queue', triggers.queued, ['state', 'trigger', 'owner', 'accepted', 'attempts', 'window'], (t) => [
      h('span', { class: `badge state-${t.state}` }, t.state.replace('_', ' ')),
      triggerCell(t), owner(t), time(t.accepted_at), String(t.attempts), preview(t),
    ], 'The queue is empty.'),
    section('Recent passes', 'recent', triggers.recent, ['result', 'trigger', 'owner', 'finished', 'wrote', 'tokens', 'error'], (t) => [
      h('span', { class: `badge result-${t.result}` }, t.result), triggerCell(t), owner(t), time(t.finished_at),
      t.written.length ? h('ul', { class: 'written' }, t.written.map((id) => h('li', null, memoryLink(id)))) : 'nothing',
      passUsage(t.usage),
      t.error ? h('span', { class: 'error-text' }, t.error) : '',
    ], 'No pass has finished since the service started.'),
  ];
}

/** The triggers that failed for good, each with a retry. */
function failedSection(triggers) {
  return section('Failed (queue/failed/)', 'failed', triggers.failed, ['trigger', 'owner', 'accepted', 'attempts', 'error', ''], (t) => [
    triggerCell(t), owner(t), time(t.accepted_at), String(t.attempts),
    h('span', { class: 'error-text' }, t.last_error || ''),
    h('button', { type: 'button', class: 'retry', 'data-id': t.id, onclick: (event) => retry(t, event.currentTarget) }, 'Retry'),
  ], 'No trigger has failed.', triggers.failed_more ? 'More are in queue/failed/ than shown.' : null);
}

/** A pass's classifier call: tokens in and out, and its cost where priced. */
function passUsage(usage) {
  if (!usage) return '—';
  const tokens = `${usage.prompt_tokens.toLocaleString()} in · ${usage.completion_tokens.toLocaleString()} out`;
  return h('span', { title: `${usage.model}${usage.estimated ? ' (counted with the tokenizer)' : ''}` },
    tokens, usage.cost === null ? null : h('br'), usage.cost === null ? null : h('span', { class: 'muted' }, money(usage.cost)));
}

function money(cost) {
  return cost === null || cost === undefined ? '—' : cost.toFixed(cost < 1 ? 4 : 2);
}

/** Today's model calls by kind and model, and the daily budgets: the
 * classifier's (capture's, and per pair) only when there is one. */
function usageSection(models, agentDriven) {
  const budget = (name, b) => {
    const limit = b.limit ? `${b.used.toLocaleString()} of ${b.limit.toLocaleString()} tokens` : `${b.used.toLocaleString()} tokens (unlimited)`;
    return h('li', { class: b.exhausted ? 'warning' : null },
      `${name}: ${limit}`, b.exhausted ? ` — spent until ${when(models.renews_at)}` : '');
  };
  const pairs = models.budgets.exhausted_pairs;
  return h('section', { 'aria-labelledby': 'usage-title', id: 'usage' },
    h('h2', { id: 'usage-title' }, `Model usage today (${models.day}, UTC)`),
    h('ul', { class: 'budgets' },
      agentDriven ? null : budget('Capture budget', models.budgets.capture),
      budget('Retrieval budget', models.budgets.retrieval),
      !agentDriven && models.budgets.capture_per_pair ? h('li', { class: pairs.length ? 'warning' : null },
        `Per pair: ${models.budgets.capture_per_pair.toLocaleString()} tokens`,
        pairs.length ? ` — spent by ${pairs.map((p) => `${p.repo}/${p.user}`).join(', ')} until ${when(models.renews_at)}` : '') : null),
    models.today.length
      ? h('div', { class: 'table-scroll' }, h('table', null,
        h('thead', null, h('tr', null, ['kind', 'model', 'calls', 'tokens in', 'tokens out', 'cost'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, models.today.map((row) => h('tr', null,
          [row.kind, row.model, row.calls.toLocaleString(), row.prompt_tokens.toLocaleString(),
            row.completion_tokens.toLocaleString(), money(row.cost)].map((cell) => h('td', null, cell))))),
        h('tfoot', null, h('tr', null, h('th', { scope: 'row', colspan: '5' }, 'Total cost today'), h('td', null, money(models.cost_today))))))
      : h('p', { class: 'muted' }, 'No model call today.'));
}

function section(title, id, rows, columns, cells, empty, note) {
  return h('section', { 'aria-labelledby': `${id}-title`, id },
    h('h2', { id: `${id}-title` }, `${title} (${rows.length})`),
    rows.length
      ? h('div', { class: 'table-scroll' }, h('table', null,
        h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, rows.map((row) => h('tr', { 'data-id': row.id }, cells(row).map((cell) => h('td', null, cell)))))))
      : h('p', { class: 'muted' }, empty),
    note ? h('p', { class: 'muted' }, note) : null);
}

function triggerCell(t) {
  return h('span', { title: t.id }, `${t.kind} `, h('code', null, shortId(t.id)), h('br'),
    h('span', { class: 'muted' }, `session ${t.session_id}${t.turn_id ? `, turn ${t.turn_id}` : ''}`));
}

function owner(t) {
  return `repo/${t.repo} · user/${t.user}`;
}

function preview(t) {
  return h('span', { title: `${t.lines} lines` }, t.preview);
}

async function retry(trigger, button) {
  button.disabled = true;
  try {
    await post(`/triggers/${encodeURIComponent(trigger.id)}/retry`);
    notify(`Trigger ${shortId(trigger.id)} is queued again.`);
    location.hash = `#/capture?t=${Date.now()}`;
  } catch (err) {
    button.disabled = false;
    notify(err.message, true);
  }
}

function statsSection(stats) {
  const groups = [
    ['Store', {
      memories: stats.store.memories,
      namespaces: Object.keys(stats.store.namespaces).length,
      'skipped files': stats.store.skipped_files,
    }],
    ['Index', {
      ready: stats.index.ready ? 'yes' : 'no',
      memories: stats.index.memories,
      pending: stats.index.pending,
      model: stats.index.model,
      dimensions: stats.index.dimensions ?? '—',
      embedded: stats.index.embedded,
      'cache hits': stats.index.cache_hits,
      'failed batches': stats.index.failed_batches,
      'start-up ms': stats.index.startup_ms ?? '—',
    }],
    stats.database ? ['Database', databaseFigures(stats.database)] : null,
    stats.capture ? ['Capture', stats.capture] : null,
    stats.retrieval ? ['Retrieval', retrievalFigures(stats.retrieval)] : null,
  ].filter(Boolean);
  return h('section', { 'aria-labelledby': 'stats-title', id: 'stats' },
    h('h2', { id: 'stats-title' }, 'Statistics'),
    stats.capture ? null : h('p', { class: 'muted' }, 'Service-wide counters are shown only to keys that see every namespace.'),
    h('div', { class: 'stat-groups' }, groups.map(([name, values]) => h('section', { class: 'stat-group' },
      h('h3', null, name),
      h('dl', null, flatten(values).map(([key, value]) => [h('dt', null, key.replaceAll('_', ' ')), h('dd', null, value)]))))));
}

/** PostgreSQL mode: whether this replica reaches the database and how far
 * behind its change log it is. */
function databaseFigures(database) {
  return {
    connected: database.connected ? 'yes' : 'no',
    'caught up': database.caught_up ? 'yes' : 'no',
    'log head': database.log_head,
    cursor: database.cursor,
    'lag changes': database.lag_changes,
    'lag ms': database.lag_ms,
  };
}

/** The retrieval counters, with the latency histogram read as
 * percentiles instead of its raw buckets. */
function retrievalFigures({ latency_ms: buckets, ...counters }) {
  const latency = {};
  for (const [name, share] of [['p50', 0.5], ['p95', 0.95], ['p99', 0.99]]) {
    latency[`${name} ms`] = percentile(buckets, share);
  }
  return { ...counters, latency };
}

/** The `share` quantile of a cumulative histogram (`{le_ms, count}`,
 * `le_ms` null for the open bucket), as the bound of the bucket it falls
 * in: "≤ 5" or "> 2000"; a dash before any retrieval. */
function percentile(buckets, share) {
  const total = buckets.length ? buckets[buckets.length - 1].count : 0;
  if (!total) return '—';
  const at = buckets.findIndex((bucket) => bucket.count >= share * total);
  const bucket = buckets[at];
  if (bucket.le_ms !== null) return `≤ ${num(bucket.le_ms)}`;
  return `> ${num(buckets[at - 1]?.le_ms ?? 0)}`;
}

/** Scalar entries of `values`, nested objects as `outer inner` keys. */
function flatten(values, prefix = '') {
  return Object.entries(values).flatMap(([key, value]) => {
    const name = prefix ? `${prefix} ${key}` : key;
    if (value !== null && typeof value === 'object') return flatten(value, name);
    if (typeof value === 'number') return [[name, Number.isInteger(value) ? value.toLocaleString() : num(value)]];
    return [[name, value === null ? '—' : String(value)]];
  });
}
