// The memory browser: a single page with hash routes.
//
//   #/?repo=&user=&scope=&category=&text=   the memory list
//   #/search?q=&repo=&user=                 search (POST /retrieve)
//   #/m/<id>                                a memory
//   #/g/<id>?depth=                         its graph
//   #/review?repo=&user=                    the memories waiting for a decision
//   #/capture                               capture and statistics
//
// Each render is timed from the route change to the page in the document
// (the API calls included) and recorded as a `performance` measure named
// `render:<view>`, shown in the footer.

import { onUnauthorized } from './api.js';
import { askForKey, notify } from './dialogs.js';
import { h, replace } from './dom.js';
import { listView } from './list.js';
import { searchView } from './search.js';
import { memoryView } from './memory.js';
import { graphView } from './graph.js';
import { captureView } from './capture.js';
import { reviewView } from './review.js';

onUnauthorized(askForKey);

const main = document.getElementById('main');
let generation = 0;

/** `part` of the address decoded, or null when it is not valid
 * percent-encoding (a hand-typed or truncated link). */
function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

function route() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, search = ''] = hash.split('?');
  const params = new URLSearchParams(search);
  const parts = path.split('/').filter(Boolean).map(decoded);
  if (parts.includes(null)) return ['missing', notFound];
  if (parts.length === 0) return ['list', () => listView(params)];
  if (parts[0] === 'search') return ['search', () => searchView(params)];
  if (parts[0] === 'm' && parts[1]) return ['memory', () => memoryView(parts[1])];
  if (parts[0] === 'g' && parts[1]) return ['graph', () => graphView(parts[1], params)];
  if (parts[0] === 'review') return ['review', () => reviewView(params)];
  if (parts[0] === 'capture') return ['capture', () => captureView()];
  return ['missing', notFound];
}

async function notFound() {
  return h('section', null, h('h1', { tabindex: '-1' }, 'Not found'),
    h('p', null, 'No page here. ', h('a', { href: '#/' }, 'Back to the memories.')));
}

async function render() {
  const mine = ++generation;
  const [view, build] = route();
  const started = performance.now();
  document.querySelectorAll('nav a[data-section]').forEach((link) => {
    const section = { list: 'memories', memory: 'memories', graph: 'memories' }[view] || view;
    link.toggleAttribute('aria-current', link.dataset.section === section);
  });
  main.setAttribute('aria-busy', 'true');
  let page;
  try {
    page = await build();
  } catch (err) {
    page = h('section', { class: 'failure' },
      h('h1', { tabindex: '-1' }, err.status === 404 ? 'Not found' : 'Something went wrong'),
      h('p', { class: 'error-text' }, err.message),
      err.status === 401 || err.status === 403
        ? h('p', null, h('button', { type: 'button', onclick: () => askForKey().then((set) => set && render()) }, 'Enter an API key'))
        : null);
  }
  // A later navigation won the race: drop this page.
  if (mine !== generation) return;
  replace(main, page);
  main.removeAttribute('aria-busy');
  const elapsed = performance.now() - started;
  performance.measure(`render:${view}`, { start: started, end: started + elapsed });
  document.getElementById('timing').textContent = `rendered in ${elapsed.toFixed(1)} ms`;
  document.title = `${main.querySelector('h1')?.textContent || 'Engram'} · Engram`;
  main.querySelector('h1')?.focus({ preventScroll: true });
}

window.addEventListener('hashchange', () => {
  notify('');
  render();
});

document.getElementById('key-button').addEventListener('click', async () => {
  if (await askForKey()) render();
});

// "/" focuses the page's first search or filter field, as on many sites.
document.addEventListener('keydown', (event) => {
  if (event.key !== '/' || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest('input, textarea, select, [contenteditable]')) return;
  const input = main.querySelector('input[type=search]');
  if (input) {
    event.preventDefault();
    input.focus();
  }
});

render();
