// A memory's page: its content as markdown, its standing (validity,
// confidence, review, archive) with what a person can do about it, its
// front-matter, its version chain, its edges both ways and its nearest
// memories; actions to edit (a new version that supersedes it), link (a
// new version with one more edge) and forget (after a confirmation).

import { del, get, post } from './api.js';
import {
  CATEGORIES, RELATIONSHIPS, field, h, memoryLink, namespaceOf, num, select, shortId, time,
} from './dom.js';
import { excerpt, plainText, renderMarkdown } from './markdown.js';
import { confirmAction, notify } from './dialogs.js';

/** Renders the page of memory `id`. */
export async function memoryView(id) {
  const path = `/memories/${encodeURIComponent(id)}`;
  // The graph at one hop gives the labels and owners of linked memories.
  const [memory, neighbours, similar] = await Promise.all([
    get(path),
    get(`${path}/graph?depth=1&limit=200`),
    get(`${path}/similar?limit=5`),
  ]);
  const nodes = new Map(neighbours.nodes.map((node) => [node.id, node]));
  const current = memory.chain[memory.chain.length - 1].id === memory.id;
  return h('article', { class: 'memory' },
    h('p', { class: 'meta' },
      h('span', { class: `badge cat-${memory.category}` }, memory.category),
      h('span', null, namespaceOf(memory)),
      h('span', null, `version ${memory.version}`),
      current ? h('span', { class: 'badge ok' }, 'current') : h('span', { class: 'badge old' }, 'superseded')),
    h('h1', { tabindex: '-1' }, excerpt(memory.content.split('\n')[0], 90) || 'Memory'),
    current ? null : h('p', { class: 'warning' }, 'A newer version replaces this one: ',
      memoryLink(memory.chain[memory.chain.length - 1].id, 'see the current version'), '.'),
    h('div', { class: 'content' }, renderMarkdown(memory.content)),
    standing(memory),
    actions(memory, current, nodes),
    h('div', { class: 'columns' },
      frontMatter(memory),
      h('div', null, chain(memory), edges(memory, nodes), similarList(similar))));
}

/** A button that settles `memory`'s standing (`POST /memories/{id}/<path>`
 * with `body`), then draws the page again and says `done`. */
export function settleButton(memory, id, label, path, body, done) {
  return h('button', {
    type: 'button', id, onclick: async () => {
      await post(`/memories/${encodeURIComponent(memory.id)}/${path}`, body);
      // The page is drawn again from the memories as they are now.
      window.dispatchEvent(new HashChangeEvent('hashchange'));
      notify(done);
    },
  }, label);
}

/** What the memory's lifecycle says, each with the act that settles it. */
function standing(memory) {
  const act = (...args) => settleButton(memory, ...args);
  const notes = [
    memory.validity === 'gone' ? h('p', { class: 'warning', id: 'standing-gone' },
      'The code it is about is gone: it is never injected. Forget it, or edit it to say what holds now.') : null,
    memory.validity === 'changed' ? h('p', { class: 'warning', id: 'standing-changed' },
      'The code it is about changed since it was written: it is injected with that note.') : null,
    memory.needs_review ? h('p', { class: 'warning', id: 'standing-review' },
      `Under review: ${memory.review_reason ?? 'a memory it is linked to changed'}. `,
      act('keep-button', 'Keep', 'review', { action: 'keep' }, 'The memory is kept.')) : null,
    memory.confidence === 'provisional' ? h('p', { class: 'muted', id: 'standing-provisional' },
      'Provisional: written by the classifier and not yet confirmed. ',
      act('confirm-button', 'Confirm', 'confirm', {}, 'The memory is confirmed.')) : null,
    memory.archived ? h('p', { class: 'muted', id: 'standing-archived' },
      'Archived for disuse: never retrieved. ',
      act('restore-button', 'Restore', 'restore', {}, 'The memory is restored.')) : null,
  ].filter(Boolean);
  return notes.length ? h('section', { class: 'standing', 'aria-label': 'Standing' }, notes) : null;
}

function frontMatter(memory) {
  const rows = [
    ['id', memory.id],
    ['version', memory.version],
    ['scope', memory.scope],
    [memory.scope, memory.scope === 'repo' ? memory.repo : memory.user],
    ['category', memory.category],
    ['created_at', time(memory.created_at)],
    ['updated_at', time(memory.updated_at)],
    ['supersedes', memory.supersedes ? memoryLink(memory.supersedes) : null],
    ['importance', memory.importance ?? null],
    ['session_id', memory.session_id ?? null],
    ['trigger', memory.trigger],
    ['anchors', memory.anchors?.length ? memory.anchors.map((anchor) => h('div', null,
      h('code', null, anchor.path), anchor.symbol ? [' ', h('code', null, anchor.symbol)] : null)) : null],
    ['commit', memory.commit ?? null],
    ['validity', memory.validity],
    ['checked_at', memory.checked_at ? time(memory.checked_at) : null],
    ['confidence', memory.confidence],
  ].filter(([, value]) => value !== null && value !== undefined);
  return h('section', { class: 'front-matter', 'aria-labelledby': 'fm-title' },
    h('h2', { id: 'fm-title' }, 'Front matter'),
    h('dl', null, rows.map(([name, value]) => [h('dt', null, name), h('dd', null, value)])));
}

function chain(memory) {
  return h('section', { 'aria-labelledby': 'chain-title' },
    h('h2', { id: 'chain-title' }, 'Versions'),
    h('ol', { class: 'chain' }, memory.chain.map((version) => h('li', {
      'aria-current': version.id === memory.id ? 'page' : null,
    },
    version.id === memory.id ? h('strong', null, `v${version.version} (this one)`) : memoryLink(version.id, `v${version.version}`),
    ' ', time(version.created_at), ' — ', excerpt(version.content, 80)))));
}

function edges(memory, nodes) {
  const row = (edge, arrow) => {
    const node = nodes.get(edge.id);
    return h('li', null,
      h('span', { class: 'relationship' }, `${arrow} ${edge.relationship}`), ' ',
      memoryLink(edge.id, node ? plainText(node.label) : shortId(edge.id)));
  };
  const { outgoing, incoming } = memory.edges;
  return h('section', { class: 'edges', 'aria-labelledby': 'edges-title' },
    h('h2', { id: 'edges-title' }, 'Edges ', h('a', { href: `#/g/${encodeURIComponent(memory.id)}`, class: 'small' }, 'graph view')),
    h('h3', null, 'From this memory'),
    outgoing.length ? h('ul', { class: 'outgoing' }, outgoing.map((e) => row(e, '→'))) : h('p', { class: 'muted' }, 'None.'),
    h('h3', null, 'To this memory'),
    incoming.length ? h('ul', { class: 'incoming' }, incoming.map((e) => row(e, '←'))) : h('p', { class: 'muted' }, 'None.'));
}

function similarList(similar) {
  return h('section', { 'aria-labelledby': 'similar-title' },
    h('h2', { id: 'similar-title' }, 'Similar memories'),
    similar.degraded ? h('p', { class: 'muted' }, `Not known yet (${similar.degraded}).`) : null,
    similar.memories.length
      ? h('ul', { class: 'similar' }, similar.memories.map((m) => h('li', null,
        h('span', { class: 'muted' }, num(m.similarity, 2)), ' ', memoryLink(m.id, excerpt(m.content, 100)))))
      : (similar.degraded ? null : h('p', { class: 'muted' }, 'None.')));
}

function actions(memory, current, nodes) {
  const panel = h('div', { class: 'panel', id: 'action-panel' });
  const show = (form) => {
    panel.replaceChildren(form);
    form.querySelector('textarea, input, select')?.focus();
  };
  return h('div', { class: 'memory-actions' },
    h('div', { class: 'actions' },
      current ? h('button', { type: 'button', id: 'edit-button', onclick: () => show(editForm(memory, nodes)) }, 'Edit') : null,
      current ? h('button', { type: 'button', id: 'link-button', onclick: () => show(linkForm(memory, nodes)) }, 'Link') : null,
      h('a', { class: 'button quiet', href: `#/g/${encodeURIComponent(memory.id)}` }, 'Graph'),
      h('button', { type: 'button', id: 'forget-button', class: 'danger', onclick: () => forget(memory) }, 'Forget')),
    panel);
}

/** The request that writes a new version of `memory` with `changes`. */
function newVersion(memory, nodes, changes) {
  const body = {
    scope: memory.scope,
    category: memory.category,
    content: memory.content,
    supersedes: memory.id,
    related: memory.related,
    ...changes,
  };
  if (memory.importance !== undefined && body.importance === undefined) body.importance = memory.importance;
  if (memory.session_id) body.session_id = memory.session_id;
  // The request's repo and user must hold every linked memory: take them
  // from the memory itself and from what its edges point at.
  const owners = [memory, ...body.related.map((edge) => nodes.get(edge.id)).filter(Boolean)];
  for (const owner of owners) {
    if (owner.repo && !body.repo) body.repo = owner.repo;
    if (owner.user && !body.user) body.user = owner.user;
  }
  return body;
}

async function writeVersion(body) {
  const written = await post('/memories', body);
  notify(`Saved as version ${written.version}.`);
  location.hash = `#/m/${encodeURIComponent(written.id)}`;
}

function editForm(memory, nodes) {
  const content = h('textarea', { name: 'content', rows: 8, required: true, id: 'edit-content' }, memory.content);
  const category = select({ name: 'category', id: 'edit-category' }, CATEGORIES, memory.category);
  const importance = h('input', {
    name: 'importance', type: 'number', min: 0, max: 1, step: 0.05, value: memory.importance ?? '', id: 'edit-importance',
  });
  const form = h('form', { class: 'edit', 'aria-label': 'Edit: write a new version' },
    h('h2', null, 'Edit'),
    h('p', { class: 'muted' }, 'Saving writes a new version that supersedes this one; this version stays in the chain.'),
    field('Content (markdown)', content),
    field('Category', category),
    field('Importance (0–1, empty for none)', importance),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', id: 'edit-save' }, 'Save new version'),
      h('button', { type: 'button', class: 'quiet', onclick: () => form.remove() }, 'Cancel')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const changes = { content: content.value, category: category.value };
    if (importance.value !== '') changes.importance = Number(importance.value);
    else delete memory.importance;
    submit(form, () => writeVersion(newVersion(memory, nodes, changes)));
  });
  return form;
}

function linkForm(memory, nodes) {
  const target = h('input', {
    name: 'target', required: true, id: 'link-target', placeholder: 'id of the memory to link to', autocomplete: 'off',
  });
  const relationship = select({ name: 'relationship', id: 'link-relationship' }, RELATIONSHIPS, 'related');
  const form = h('form', { class: 'link', 'aria-label': 'Link to another memory' },
    h('h2', null, 'Link'),
    h('p', { class: 'muted' }, 'Adds an edge from this memory; like an edit, it writes a new version.'),
    field('Memory id', target),
    field('Relationship', relationship),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', id: 'link-save' }, 'Add edge'),
      h('button', { type: 'button', class: 'quiet', onclick: () => form.remove() }, 'Cancel')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit(form, async () => {
      const id = target.value.trim();
      const other = await get(`/memories/${encodeURIComponent(id)}`);
      const known = new Map(nodes);
      known.set(other.id, other);
      const related = [...memory.related.filter((edge) => edge.id !== other.id),
        { id: other.id, relationship: relationship.value }];
      await writeVersion(newVersion(memory, known, { related }));
    });
  });
  return form;
}

/** Forgets `memory` once the person confirms; whether it was forgotten. */
export async function forgetMemory(memory) {
  const sure = await confirmAction(
    'Forget this memory?',
    `Its file (${namespaceOf(memory)}, version ${memory.version}) is removed for good; edges to it are ignored from then on.`,
    'Forget',
  );
  if (!sure) return false;
  await del(`/memories/${encodeURIComponent(memory.id)}`);
  notify('The memory is forgotten.');
  return true;
}

async function forget(memory) {
  if (await forgetMemory(memory)) location.hash = '#/';
}

/** Runs `action` for `form`, disabling it meanwhile and showing its error. */
async function submit(form, action) {
  const buttons = form.querySelectorAll('button');
  buttons.forEach((button) => { button.disabled = true; });
  form.querySelector('.form-error')?.remove();
  try {
    await action();
  } catch (err) {
    form.append(h('p', { class: 'form-error', role: 'alert' }, err.message));
  } finally {
    buttons.forEach((button) => { button.disabled = false; });
  }
}
