// DOM helpers. Every text goes in through text nodes (textContent), never
// through innerHTML: memory content is untrusted and stays data.

/** An element: `h('a', {href: '#/'}, 'text', child)`. `on*` functions
 * become listeners; `null`/`false` attributes and children are skipped. */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element, with the same conventions as `h`. */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) {
      // Only functions: a handler is never built from text.
      if (typeof value !== 'function') throw new TypeError(`${name} must be a function`);
      node.addEventListener(name.slice(2), value);
    } else {
      node.setAttribute(name, value === true ? '' : String(value));
    }
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces everything in `node` with `children`. */
export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

/** A date as the reader's local date and time. */
export function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

/** A `<time>` element for an ISO timestamp. */
export function time(iso) {
  return h('time', { datetime: iso, title: iso }, when(iso));
}

/** `text` cut to `chars` characters, with an ellipsis when cut. */
export function clip(text, chars) {
  const flat = String(text).replace(/\s+/g, ' ').trim();
  return flat.length > chars ? `${flat.slice(0, chars)}…` : flat;
}

/** A number with up to `digits` decimals. */
export function num(value, digits = 3) {
  return typeof value === 'number' ? String(Number(value.toFixed(digits))) : '—';
}

/** The namespace of a memory or trigger view: `repo/x` or `user/y`. */
export function namespaceOf(memory) {
  return memory.scope === 'repo' ? `repo/${memory.repo}` : `user/${memory.user}`;
}

export const CATEGORIES = [
  'coding-preferences', 'project-conventions', 'architectural-decisions',
  'user-facts', 'corrections', 'patterns',
];

export const RELATIONSHIPS = [
  'refines', 'contradicts', 'extends', 'depends-on', 'example-of', 'related',
];

/** A `<select>` of `values`, with an optional empty first choice. */
export function select(attrs, values, selected, empty) {
  return h('select', attrs,
    empty === undefined ? null : h('option', { value: '' }, empty),
    values.map((value) => h('option', { value, selected: value === selected }, value)));
}

/** A labelled field: the label, then the control. */
export function field(label, control) {
  const id = control.id || `f-${Math.random().toString(36).slice(2)}`;
  control.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), control);
}

/** A link to a memory's page. */
export function memoryLink(id, text) {
  return h('a', { href: `#/m/${encodeURIComponent(id)}` }, text ?? shortId(id));
}

/** The last 12 characters of an id, enough to tell ids apart on screen. */
export function shortId(id) {
  return `…${String(id).slice(-12)}`;
}
