// The review list: the memories that wait for a person's decision, by
// kind (under review because a memory they are linked to changed; about
// code that is gone; provisional, written by the classifier and not yet
// confirmed; archived for disuse), each with the acts that settle it in
// place. A repo or user in the address (#/review?repo=…) narrows it.

import { get, query } from './api.js';
import { h, time } from './dom.js';
import { item } from './list.js';
import { forgetMemory, settleButton } from './memory.js';

const PAGE = 50;

/** Forgets `memory` once the person confirms, then draws the list again. */
function forgetButton(memory) {
  return h('button', {
    type: 'button',
    class: 'danger',
    'data-act': 'forget',
    onclick: async () => {
      if (await forgetMemory(memory)) window.dispatchEvent(new HashChangeEvent('hashchange'));
    },
  }, 'Forget');
}

const KINDS = [
  {
    id: 'review',
    title: 'Under review',
    about: 'A memory they are linked to was superseded, forgotten or found gone. They are injected with that note until kept or forgotten.',
    filter: { needs_review: true },
    note: (memory) => memory.review_reason ?? 'a memory it is linked to changed',
    acts: (memory) => [
      settleButton(memory, null, 'Keep', 'review', { action: 'keep' }, 'The memory is kept.'),
      forgetButton(memory),
    ],
  },
  {
    id: 'gone',
    title: 'Code gone',
    about: 'The file or symbol they are about no longer exists. They are never injected: forget them, or edit them to say what holds now.',
    filter: { validity: 'gone' },
    note: (memory) => (memory.checked_at ? ['checked ', time(memory.checked_at)] : null),
    acts: (memory) => [forgetButton(memory)],
  },
  {
    id: 'provisional',
    title: 'Provisional',
    about: 'Written by the classifier and not yet confirmed: they rank a little lower, and are archived if nobody confirms them.',
    filter: { confidence: 'provisional' },
    note: () => null,
    acts: (memory) => [
      settleButton(memory, null, 'Confirm', 'confirm', {}, 'The memory is confirmed.'),
      forgetButton(memory),
    ],
  },
  {
    id: 'archived',
    title: 'Archived',
    about: 'Let go for disuse or left unconfirmed: never retrieved. Restore one to bring it back.',
    filter: { archived: true },
    note: (memory) => (memory.used_at ? ['last used ', time(memory.used_at)] : 'never used'),
    acts: (memory) => [
      settleButton(memory, null, 'Restore', 'restore', {}, 'The memory is restored.'),
    ],
  },
];

/** Renders the review list for `params` (URLSearchParams of the address). */
export async function reviewView(params) {
  const owners = { repo: params.get('repo') || '', user: params.get('user') || '' };
  const pages = await Promise.all(KINDS.map((kind) => get(`/memories${query({ ...owners, ...kind.filter, limit: PAGE })}`)));
  const waiting = pages.reduce((sum, page) => sum + page.memories.length, 0);
  return h('section', { class: 'review' },
    h('h1', { tabindex: '-1' }, 'Review'),
    h('p', { class: 'muted' }, waiting
      ? 'The memories that wait for a decision. Nothing here is deleted unless you forget it.'
      : 'Nothing waits for a decision.'),
    KINDS.map((kind, index) => group(kind, pages[index])));
}

function group(kind, page) {
  if (!page.memories.length) return null;
  const count = `${page.memories.length}${page.next_cursor ? '+' : ''}`;
  return h('section', { id: `review-${kind.id}`, 'aria-labelledby': `review-${kind.id}-title` },
    h('h2', { id: `review-${kind.id}-title` }, `${kind.title} (${count})`),
    h('p', { class: 'muted' }, kind.about),
    h('ol', { class: 'memories' }, page.memories.map((memory) => {
      const row = item(memory);
      row.dataset.id = memory.id;
      const note = kind.note(memory);
      row.append(
        ...(note ? [h('p', { class: 'muted review-note' }, note)] : []),
        h('div', { class: 'actions' }, kind.acts(memory)),
      );
      return row;
    })),
    page.next_cursor
      ? h('p', { class: 'muted' }, `The first ${page.memories.length} are shown; those settled make room for the rest.`)
      : null);
}
