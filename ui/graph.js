// The graph view: a memory's neighbourhood (GET /memories/{id}/graph) over
// related edges and versions, laid out by a small force simulation and
// drawn as SVG. Every node is a link (Tab moves between them, Enter opens
// the memory); its label shows on hover and focus, and always for the
// memory itself and its direct neighbours in a large graph.

import { get, query } from './api.js';
import { h, svg } from './dom.js';
import { plainText } from './markdown.js';

const SIZE = 1000;
const MARGIN = 40;
// Labels run to the right of their dot.
const LABEL_ROOM = 260;
// Beyond this many nodes only the centre and its neighbours are labelled.
const LABEL_ALL_UP_TO = 40;

/** Renders the graph around memory `id`. */
export async function graphView(id, params) {
  const depth = Math.min(4, Math.max(1, Number(params.get('depth')) || 2));
  const graph = await get(`/memories/${encodeURIComponent(id)}/graph${query({ depth, limit: 200 })}`);
  const positions = layout(graph);
  const depthLinks = [1, 2, 3, 4].map((d) => (d === depth
    ? h('strong', { 'aria-current': 'true' }, String(d))
    : h('a', { href: `#/g/${encodeURIComponent(id)}${query({ depth: d })}` }, String(d))));
  return h('section', { class: 'graph' },
    h('h1', { tabindex: '-1' }, 'Neighbourhood'),
    h('p', { class: 'muted' },
      `${graph.nodes.length} memories, ${graph.edges.length} edges within `, depthLinks.flatMap((link) => [link, ' ']),
      'hops', graph.truncated ? ' (cut at 200 memories)' : '', '. ',
      h('a', { href: `#/m/${encodeURIComponent(id)}` }, 'Back to the memory')),
    legend(),
    draw(graph, positions));
}

/** Node positions (within SIZE × SIZE, and the box's `width` and
 * `height`): a force layout (repulsion between
 * every pair, springs along edges, a pull to the centre), started from
 * rings by hop count so it settles quickly and the same way every time. */
export function layout(graph) {
  const n = graph.nodes.length;
  const index = new Map(graph.nodes.map((node, i) => [node.id, i]));
  const rings = new Map();
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  graph.nodes.forEach((node, i) => {
    const ring = rings.get(node.hops) || [];
    ring.push(i);
    rings.set(node.hops, ring);
  });
  for (const [hops, members] of rings) {
    members.forEach((i, k) => {
      const angle = (2 * Math.PI * k) / members.length + hops;
      x[i] = Math.cos(angle) * hops * 120;
      y[i] = Math.sin(angle) * hops * 120;
    });
  }
  const springs = graph.edges
    .map((edge) => [index.get(edge.from), index.get(edge.to)])
    .filter(([a, b]) => a !== undefined && b !== undefined);
  const ideal = 90;
  const fx = new Float64Array(n);
  const fy = new Float64Array(n);
  const steps = n > 120 ? 160 : 260;
  for (let step = 0; step < steps; step += 1) {
    const heat = 1 - step / steps;
    fx.fill(0);
    fy.fill(0);
    for (let i = 0; i < n; i += 1) {
      for (let j = i + 1; j < n; j += 1) {
        const dx = x[i] - x[j];
        const dy = y[i] - y[j];
        const d2 = dx * dx + dy * dy + 0.01;
        const push = (ideal * ideal) / d2;
        fx[i] += dx * push; fy[i] += dy * push;
        fx[j] -= dx * push; fy[j] -= dy * push;
      }
    }
    for (const [a, b] of springs) {
      const dx = x[b] - x[a];
      const dy = y[b] - y[a];
      const d = Math.sqrt(dx * dx + dy * dy) + 0.01;
      const pull = (d - ideal) / d / 2;
      fx[a] += dx * pull; fy[a] += dy * pull;
      fx[b] -= dx * pull; fy[b] -= dy * pull;
    }
    const limit = 30 * heat + 1;
    for (let i = 0; i < n; i += 1) {
      fx[i] -= x[i] * 0.02;
      fy[i] -= y[i] * 0.02;
      const f = Math.sqrt(fx[i] * fx[i] + fy[i] * fy[i]);
      const scale = f > limit ? limit / f : 1;
      x[i] += fx[i] * scale;
      y[i] += fy[i] * scale;
    }
    // The memory asked for stays in the middle.
    if (n) { x[0] = 0; y[0] = 0; }
  }
  // Natural size (small graphs are not blown up), with room for labels.
  let minX = Infinity; let maxX = -Infinity; let minY = Infinity; let maxY = -Infinity;
  for (let i = 0; i < n; i += 1) {
    minX = Math.min(minX, x[i]); maxX = Math.max(maxX, x[i]);
    minY = Math.min(minY, y[i]); maxY = Math.max(maxY, y[i]);
  }
  const span = Math.max(maxX - minX, maxY - minY, 1);
  const scale = Math.min(1.2, (SIZE - 2 * MARGIN) / span);
  const positions = new Map();
  graph.nodes.forEach((node, i) => {
    positions.set(node.id, { x: MARGIN + (x[i] - minX) * scale, y: MARGIN + (y[i] - minY) * scale });
  });
  positions.width = Math.max(2 * MARGIN + (maxX - minX) * scale + LABEL_ROOM, 400);
  positions.height = 2 * MARGIN + (maxY - minY) * scale;
  return positions;
}

function draw(graph, positions) {
  const labelled = (node) => graph.nodes.length <= LABEL_ALL_UP_TO || node.hops <= 1;
  const lines = graph.edges.map((edge) => {
    const from = positions.get(edge.from);
    const to = positions.get(edge.to);
    if (!from || !to) return null;
    return svg('line', {
      x1: num(from.x), y1: num(from.y), x2: num(to.x), y2: num(to.y),
      class: edge.kind === 'supersedes' ? 'edge supersedes' : `edge rel-${edge.relationship}`,
      'marker-end': 'url(#arrow)',
    }, svg('title', {}, edge.kind === 'supersedes' ? 'supersedes' : edge.relationship));
  });
  const nodes = graph.nodes.map((node) => {
    const at = positions.get(node.id);
    const radius = node.hops === 0 ? 14 : 8;
    const name = `${node.category}, v${node.version}${node.current ? '' : ' (superseded)'}: ${plainText(node.label)}`;
    return svg('a', {
      href: `#/m/${encodeURIComponent(node.id)}`,
      class: `node cat-${node.category}${node.current ? '' : ' superseded'}${node.hops === 0 ? ' centre' : ''}`,
      'aria-label': name,
      'data-id': node.id,
    },
    svg('title', {}, name),
    svg('circle', { cx: num(at.x), cy: num(at.y), r: radius }),
    svg('text', {
      x: num(at.x + radius + 4), y: num(at.y + 4), class: labelled(node) ? 'label' : 'label hover-only',
    }, shortLabel(node.label)));
  });
  return h('div', { class: 'graph-box' },
    svg('svg', {
      viewBox: `0 0 ${num(positions.width)} ${num(positions.height)}`,
      width: num(positions.width),
      height: num(positions.height), role: 'group', 'aria-label': 'Graph of related memories', id: 'graph-svg',
    },
    svg('defs', {}, svg('marker', {
      id: 'arrow', viewBox: '0 0 10 10', refX: 20, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse',
    }, svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrow' }))),
    svg('g', { class: 'edges' }, lines),
    svg('g', { class: 'nodes' }, nodes)));
}

function legend() {
  return h('p', { class: 'legend muted' },
    h('span', { class: 'key supersedes' }, '- - supersedes'), ' ',
    h('span', { class: 'key related' }, '— related edge'), ' ',
    h('span', null, 'Large dot: this memory; hollow: superseded. Tab through the dots; Enter opens one.'));
}

/** A label without markdown heading marks, at most 40 characters. */
function shortLabel(label) {
  const text = plainText(label);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

function num(value) {
  return value.toFixed(1);
}
