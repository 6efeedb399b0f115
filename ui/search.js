// Search: POST /retrieve in query mode for one (repo, user), showing each
// result's relevance, its four scores and why it is there.

import { post, query } from './api.js';
import {
  field, h, memoryLink, namespaceOf, num,
} from './dom.js';
import { knownNamespaces, ownerOptions } from './list.js';
import { excerpt } from './markdown.js';

/** Renders the search page; runs the search when the address holds `q`. */
export async function searchView(params) {
  const request = {
    q: params.get('q') || '',
    repo: params.get('repo') || '',
    user: params.get('user') || '',
    top_k: params.get('top_k') || '10',
  };
  const [namespaces, result] = await Promise.all([
    knownNamespaces(),
    request.q ? retrieve(request) : null,
  ]);
  return h('section', { class: 'search' },
    h('h1', { tabindex: '-1' }, 'Search'),
    h('p', { class: 'muted' },
      'Searches one repo and one user the way an agent does (POST /retrieve, query mode, no cache). Empty fields use the service\u2019s defaults.'),
    searchForm(request, namespaces),
    result ? results(result) : null);
}

function retrieve(request) {
  const body = {
    turn_id: `ui-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`,
    query: request.q,
    top_k: Number(request.top_k) || 10,
    use_cache: false,
  };
  if (request.repo) body.repo = request.repo;
  if (request.user) body.user = request.user;
  return post('/retrieve', body);
}

function searchForm(request, namespaces) {
  const owners = (scope) => ownerOptions(namespaces, scope);
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Search memories' },
    field('Query', h('input', {
      name: 'q', type: 'search', value: request.q, required: true, id: 'search-query', placeholder: 'what do we know about…',
    })),
    field('Repo', h('input', { name: 'repo', value: request.repo, list: 'search-repos', autocomplete: 'off' })),
    field('User', h('input', { name: 'user', value: request.user, list: 'search-users', autocomplete: 'off' })),
    field('Results', h('input', { name: 'top_k', type: 'number', min: 1, max: 100, value: request.top_k })),
    h('div', { class: 'field buttons' }, h('button', { type: 'submit' }, 'Search')),
    h('datalist', { id: 'search-repos' }, owners('repo')),
    h('datalist', { id: 'search-users' }, owners('user')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = `#/search${query(Object.fromEntries(new FormData(form)))}`;
  });
  return form;
}

function results(result) {
  return h('div', { class: 'results' },
    result.degraded ? h('p', { class: 'warning' }, `Degraded: ${result.degraded}. Results may be incomplete.`) : null,
    h('p', { class: 'muted' },
      `${result.memories.length} result${result.memories.length === 1 ? '' : 's'}`,
      result.timings_ms ? ` in ${num(result.timings_ms.total, 1)} ms` : ''),
    result.memories.length
      ? h('ol', { class: 'memories' }, result.memories.map(hit))
      : h('p', { class: 'empty' }, 'Nothing relevant found.'));
}

function hit(memory) {
  const scores = memory.scores || {};
  return h('li', { class: 'memory-item hit' },
    h('div', { class: 'meta' },
      h('strong', { class: 'relevance', title: 'weighted relevance' }, `relevance ${num(memory.relevance)}`),
      h('span', { class: `badge cat-${memory.category}` }, memory.category),
      h('span', null, namespaceOf(memory)),
      memory.version > 1 ? h('span', null, `v${memory.version}`) : null),
    h('p', null, memoryLink(memory.id, excerpt(memory.content, 300))),
    h('dl', { class: 'scores' },
      // Every score the service sent, in its order: a new signal shows up
      // without a change here.
      Object.entries(scores)
        .filter(([, value]) => typeof value === 'number')
        .map(([name, value]) => [h('dt', null, name.replace('_', ' ')), h('dd', null, num(value))])),
    h('p', { class: 'reason' }, h('span', { class: 'muted' }, 'Why: '), reason(memory.reason)));
}

const FOUND_BY = {
  vector: 'by meaning (vector search)',
  lexical: 'by its words (lexical search)',
  both: 'by meaning and by its words',
};

/** `reason` in words: the query, a hypothesis, a hop, or the filters. */
export function reason(why) {
  if (!why) return 'unknown';
  const sentence = why.passage ? ', by one of its sentences' : '';
  const moved = why.feedback ? ', closer still to the query moved toward the best match' : '';
  const found = FOUND_BY[why.found_by] ? `, ${FOUND_BY[why.found_by]}${sentence}${moved}` : '';
  const stand = why.matched_version
    ? [' (an older version, ', memoryLink(why.matched_version), ', matched; this is the current one)']
    : [];
  switch (why.kind) {
    case 'query': return [`it matches the query${found}`, ...stand];
    case 'hypothesis': return [`it matches hypothesis ${why.hypothesis + 1}${found}`, ...stand];
    case 'hop': return [`a ${why.relationship} edge (${why.direction}) links it with `, memoryLink(why.from)];
    case 'filter': return 'it passed the filters';
    default: return why.kind;
  }
}
