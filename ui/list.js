// The memory list: GET /memories with its filters, newest first, a page at
// a time. The filters and the page live in the address (#/?repo=…), so a
// view can be bookmarked and the back button works.

import { get, query } from './api.js';
import {
  CATEGORIES, field, h, memoryLink, namespaceOf, select, time,
} from './dom.js';
import { excerpt } from './markdown.js';

const PAGE = 50;

/** Renders the list for `params` (URLSearchParams of the address). */
export async function listView(params) {
  const filters = {
    repo: params.get('repo') || '',
    user: params.get('user') || '',
    scope: params.get('scope') || '',
    category: params.get('category') || '',
    text: params.get('text') || '',
  };
  // The cursors of the pages before this one, so "Previous" needs no state.
  const trail = (params.get('trail') || '').split(',').filter(Boolean);
  const cursor = params.get('cursor') || '';
  const [page, stats] = await Promise.all([
    get(`/memories${query({ ...filters, limit: PAGE, cursor })}`),
    get('/stats'),
  ]);
  const namespaces = namespacesOf(stats);
  return h('section', { class: 'list' },
    h('h1', { tabindex: '-1' }, 'Memories'),
    skippedFiles(stats.store),
    filterForm(filters, namespaces),
    namespaceChips(namespaces, filters),
    page.memories.length
      ? h('ol', { class: 'memories', 'aria-label': 'Memories, newest first' }, page.memories.map(item))
      : h('p', { class: 'empty' }, 'No memory matches these filters.'),
    pager(filters, trail, cursor, page.next_cursor));
}

/** The namespaces this key sees, from /stats (a limited key sees only its own). */
export async function knownNamespaces() {
  return namespacesOf(await get('/stats'));
}

function namespacesOf(stats) {
  return Object.entries(stats.store.namespaces).map(([name, counts]) => ({ name, memories: counts.memories }));
}

/** The files of the data directory the store cannot use (one that stopped
 * parsing keeps its last good version in service), until they are fixed. */
function skippedFiles(store) {
  if (!store.skipped_files) return null;
  const count = store.skipped_files === 1 ? '1 file' : `${store.skipped_files} files`;
  return h('details', { class: 'warning skipped-files', id: 'skipped-files' },
    h('summary', null, `${count} in the data directory cannot be used: fix or remove them on disk.`),
    h('ul', null, store.skipped.map((file) => h('li', null, h('code', null, file.path), ': ', file.reason))),
    store.skipped.length < store.skipped_files ? h('p', { class: 'muted' }, `The first ${store.skipped.length} are listed.`) : null);
}

/** `<option>`s of the owners of `scope` (repo or user) among `namespaces`. */
export function ownerOptions(namespaces, scope) {
  return namespaces
    .filter((ns) => ns.name.startsWith(`${scope}/`))
    .map((ns) => h('option', { value: ns.name.slice(scope.length + 1) }));
}

function filterForm(filters, namespaces) {
  const owners = (scope) => ownerOptions(namespaces, scope);
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter memories' },
    field('Text', h('input', { name: 'text', type: 'search', value: filters.text, placeholder: 'words in the content', id: 'filter-text' })),
    field('Repo', h('input', { name: 'repo', value: filters.repo, list: 'known-repos', autocomplete: 'off', id: 'filter-repo' })),
    field('User', h('input', { name: 'user', value: filters.user, list: 'known-users', autocomplete: 'off', id: 'filter-user' })),
    field('Scope', select({ name: 'scope', id: 'filter-scope' }, ['repo', 'user'], filters.scope, 'any')),
    field('Category', select({ name: 'category', id: 'filter-category' }, CATEGORIES, filters.category, 'any')),
    h('div', { class: 'field buttons' },
      h('button', { type: 'submit' }, 'Filter'),
      h('a', { href: '#/', class: 'button quiet' }, 'Clear')),
    h('datalist', { id: 'known-repos' }, owners('repo')),
    h('datalist', { id: 'known-users' }, owners('user')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    location.hash = `#/${query(data)}`;
  });
  return form;
}

function namespaceChips(namespaces, filters) {
  if (!namespaces.length) return null;
  return h('nav', { class: 'chips', 'aria-label': 'Namespaces' },
    h('span', { class: 'muted' }, 'Namespaces: '),
    namespaces.map((ns) => {
      const [scope, owner] = ns.name.split('/');
      const active = filters[scope] === owner && filters.scope === scope;
      return h('a', {
        href: `#/${query({ [scope]: owner, scope })}`,
        class: active ? 'chip active' : 'chip',
        'aria-current': active ? 'true' : null,
      }, `${ns.name} (${ns.memories})`);
    }));
}

/** One memory in a list: category, owner, date and the start of its text. */
export function item(memory) {
  return h('li', { class: 'memory-item' },
    h('div', { class: 'meta' },
      h('span', { class: `badge cat-${memory.category}` }, memory.category),
      h('span', null, namespaceOf(memory)),
      memory.version > 1 ? h('span', null, `v${memory.version}`) : null,
      time(memory.created_at)),
    h('p', null, memoryLink(memory.id, excerpt(memory.content, 240))));
}

function pager(filters, trail, cursor, next) {
  const base = { ...filters };
  const previous = trail.length
    ? h('a', {
      class: 'button quiet',
      rel: 'prev',
      href: `#/${query({ ...base, cursor: trail[trail.length - 1] === '-' ? '' : trail[trail.length - 1], trail: trail.slice(0, -1).join(',') })}`,
    }, '← Newer')
    : null;
  const following = next
    ? h('a', {
      class: 'button quiet',
      rel: 'next',
      href: `#/${query({ ...base, cursor: next, trail: [...trail, cursor || '-'].join(',') })}`,
    }, 'Older →')
    : null;
  if (!previous && !following) return null;
  return h('nav', { class: 'pager', 'aria-label': 'Pages' }, previous, following);
}
