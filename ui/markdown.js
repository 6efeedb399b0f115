// A small, safe markdown renderer for memory content, which is untrusted.
//
// It builds DOM nodes and sets text only through text nodes, so raw HTML in
// a memory shows as text and no script can run from it. Links are kept only
// when they are absolute http, https or mailto URLs; any other link
// (javascript:, data:, relative…) is shown as plain text. Supported:
// headings, paragraphs with line breaks, fenced and indented code, inline
// code, bold, italics, links, bullet and numbered lists, block quotes and
// rules. Images are shown as their alt text: nothing is fetched.
//
// Its work is linear in the text at each nesting level (at most MAX_DEPTH):
// a memory full of unclosed markers costs no more than plain text.

import { clip } from './dom.js';

const SAFE_SCHEME = /^(https?:\/\/|mailto:)/i;

/** A safe href for `raw`, or null when the link is not allowed. */
export function safeHref(raw) {
  const text = String(raw).trim();
  if (!SAFE_SCHEME.test(text)) return null;
  try {
    const url = new URL(text);
    return ['http:', 'https:', 'mailto:'].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

/** `source` rendered as a `<div class="markdown">`. */
export function renderMarkdown(source) {
  const root = document.createElement('div');
  root.className = 'markdown';
  blocks(String(source).replace(/\r\n?/g, '\n').split('\n'), root, 0);
  return root;
}

/** The first `chars` characters a reader sees of `source`, on one line:
 * for previews. Only the head of the source is rendered, so a long memory
 * costs a list no more than a short one. */
export function excerpt(source, chars) {
  return clip(plainText(String(source).slice(0, chars * 4)), chars);
}

/** The text a reader sees of `source` (markup gone), on one line: for
 * labels. */
export function plainText(source) {
  const root = renderMarkdown(source);
  for (const block of root.querySelectorAll('br, p, li, h3, h4, h5, h6, pre, hr')) {
    block.after(document.createTextNode(' '));
  }
  return root.textContent.replace(/\s+/g, ' ').trim();
}

const FENCE = /^\s{0,3}(```|~~~)(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const INDENTED = /^( {4}|\t)(.*)$/;

// Nested quotes and lists recurse; past this depth they read as text.
const MAX_DEPTH = 8;

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

function blocks(lines, parent, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
      continue;
    }
    let match;
    if ((match = FENCE.exec(line))) {
      const fence = match[1];
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i += 1;
      parent.append(codeBlock(body.join('\n'), match[2].trim()));
    } else if ((match = HEADING.exec(line))) {
      // A memory's headings sit below the page's own (h1, h2).
      const level = Math.min(6, match[1].length + 2);
      const heading = document.createElement(`h${level}`);
      inline(match[2], heading, depth);
      parent.append(heading);
      i += 1;
    } else if (RULE.test(line)) {
      parent.append(document.createElement('hr'));
      i += 1;
    } else if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const body = [];
      while (i < lines.length && (match = QUOTE.exec(lines[i]))) {
        body.push(match[1]);
        i += 1;
      }
      const quote = document.createElement('blockquote');
      blocks(body, quote, depth + 1);
      parent.append(quote);
    } else if (ITEM.test(line) && depth < MAX_DEPTH) {
      i = list(lines, i, parent, depth);
    } else if (INDENTED.test(line)) {
      const body = [];
      while (i < lines.length && (match = INDENTED.exec(lines[i]))) {
        body.push(match[2]);
        i += 1;
      }
      parent.append(codeBlock(body.join('\n'), ''));
    } else {
      const body = [line];
      i += 1;
      while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) body.push(lines[i++]);
      const paragraph = document.createElement('p');
      body.forEach((text, n) => {
        if (n > 0) paragraph.append(document.createElement('br'));
        inline(text.trim(), paragraph, depth);
      });
      parent.append(paragraph);
    }
  }
}

function codeBlock(text, language) {
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  if (/^[\w+-]{1,32}$/.test(language)) code.dataset.language = language;
  code.textContent = text;
  pre.append(code);
  return pre;
}

/** A list starting at `lines[start]`; returns the index after it. */
function list(lines, start, parent, depth) {
  const first = ITEM.exec(lines[start]);
  const ordered = /\d/.test(first[2]);
  const indent = first[1].length;
  const node = document.createElement(ordered ? 'ol' : 'ul');
  if (ordered) {
    const from = parseInt(first[2], 10);
    if (from !== 1) node.setAttribute('start', String(from));
  }
  let i = start;
  while (i < lines.length) {
    const match = ITEM.exec(lines[i]);
    if (!match || match[1].length !== indent || /\d/.test(match[2]) !== ordered) break;
    const body = [match[3]];
    i += 1;
    // Continuation and nested lines: indented deeper than the marker.
    while (i < lines.length && lines[i].trim() && /^\s/.test(lines[i])
      && (lines[i].match(/^\s*/)[0].length > indent)) {
      body.push(lines[i].slice(Math.min(lines[i].match(/^\s*/)[0].length, indent + 2)));
      i += 1;
    }
    const item = document.createElement('li');
    if (body.length === 1) inline(body[0], item, depth);
    else blocks(body, item, depth + 1);
    node.append(item);
    while (i < lines.length && !lines[i].trim() && i + 1 < lines.length && ITEM.test(lines[i + 1])) i += 1;
  }
  parent.append(node);
  return i;
}

const ESCAPABLE = /[\\`*_{}[\]()#+\-.!>~|]/;
// Sticky, matched where the text stands (no copy of the rest); a label or
// target longer than a line's worth is not a link, which bounds each try.
const LINK = /(!?)\[([^\]]{0,500})\]\(\s*<?([^()\s<>]{0,2000})>?(?:\s+"[^"]{0,500}")?\s*\)/y;
const TICKS = /`+/y;

/** Inline markdown of `text`, appended to `parent`. */
function inline(text, parent, depth) {
  // Found on the first opener of each marker, once for the whole text.
  const closers = {};
  let plain = '';
  const flush = () => {
    if (plain) parent.append(document.createTextNode(plain));
    plain = '';
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length && ESCAPABLE.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '`') {
      TICKS.lastIndex = i;
      const ticks = TICKS.exec(text)[0];
      const end = text.indexOf(ticks, i + ticks.length);
      if (end > i) {
        flush();
        const code = document.createElement('code');
        code.textContent = text.slice(i + ticks.length, end).trim();
        parent.append(code);
        i = end + ticks.length;
        continue;
      }
    }
    if (depth < MAX_DEPTH && (text.startsWith('**', i) || text.startsWith('__', i))) {
      const marker = text.slice(i, i + 2);
      const end = text.indexOf(marker, i + 2);
      if (end > i + 2) {
        flush();
        const strong = document.createElement('strong');
        inline(text.slice(i + 2, end), strong, depth + 1);
        parent.append(strong);
        i = end + 2;
        continue;
      }
    }
    if (depth < MAX_DEPTH && (c === '*' || c === '_') && emphasisOpens(text, i)) {
      closers[c] ??= emphasisClosers(text, c);
      const end = closers[c].after(i + 1);
      if (end > 0) {
        flush();
        const em = document.createElement('em');
        inline(text.slice(i + 1, end), em, depth + 1);
        parent.append(em);
        i = end + 1;
        continue;
      }
    }
    if (c === '[' || (c === '!' && text[i + 1] === '[')) {
      LINK.lastIndex = i;
      const match = LINK.exec(text);
      if (match) {
        flush();
        parent.append(match[1] ? image(match[2]) : link(match[2], match[3], depth));
        i += match[0].length;
        continue;
      }
    }
    plain += c;
    i += 1;
  }
  flush();
}

/** Emphasis opens before a non-space, and `_` only at a word's start. */
function emphasisOpens(text, i) {
  const next = text[i + 1];
  if (!next || /\s/.test(next) || next === text[i]) return false;
  return text[i] === '*' || i === 0 || !/[\p{L}\p{N}]/u.test(text[i - 1]);
}

/** Where `marker` may close emphasis in `text`: after a non-space, and
 * `_` only at a word's end. Found once per text; `after(from)` answers the
 * first such place past `from`, and since the text is read left to right
 * it only ever moves forward. */
function emphasisClosers(text, marker) {
  const places = [];
  for (let end = text.indexOf(marker, 1); end > 0; end = text.indexOf(marker, end + 1)) {
    const after = text[end + 1];
    if (/\s/.test(text[end - 1])) continue;
    if (marker === '_' && after && /[\p{L}\p{N}]/u.test(after)) continue;
    places.push(end);
  }
  let next = 0;
  return {
    after(from) {
      while (next < places.length && places[next] <= from) next += 1;
      return next < places.length ? places[next] : -1;
    },
  };
}

function link(label, target, depth) {
  const href = safeHref(target);
  if (!href) {
    // Not a link we follow: its text, and the target as text beside it.
    const span = document.createElement('span');
    span.className = 'unsafe-link';
    span.title = 'link not followed: only http, https and mailto links are';
    inline(label, span, depth + 1);
    if (target) span.append(document.createTextNode(` (${target})`));
    return span;
  }
  const anchor = document.createElement('a');
  anchor.href = href;
  anchor.rel = 'noopener noreferrer nofollow';
  anchor.target = '_blank';
  inline(label || href, anchor, depth + 1);
  return anchor;
}

function image(alt) {
  const span = document.createElement('span');
  span.className = 'image-alt';
  span.textContent = `[image: ${alt}]`;
  return span;
}
