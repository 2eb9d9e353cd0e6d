'use strict';
// The documented behaviour, written independently, over seeded random titles.
// Prints [[title, options, expected slug], ...] as JSON. It never loads the
// workspace: the expected values come from a process the agent's code is not in.

function reference(text, { separator = '-', maxLength = Infinity } = {}) {
  const words = [];
  let word = '';
  for (const ch of String(text).normalize('NFKD').toLowerCase()) {
    const code = ch.codePointAt(0);
    if (code >= 0x300 && code <= 0x36f) continue;
    if (ch === '&') {
      if (word) words.push(word);
      words.push('and');
      word = '';
    } else if (/[a-z0-9]/.test(ch)) {
      word += ch;
    } else if (word) {
      words.push(word);
      word = '';
    }
  }
  if (word) words.push(word);
  let slug = words.join(separator);
  if (slug.length > maxLength) slug = slug.slice(0, maxLength);
  while (separator && slug.endsWith(separator)) slug = slug.slice(0, -separator.length);
  return slug;
}

function rng(seed) {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const alphabet = 'abcXYZ019 -_.,!&éÉñÑüßøœ\tﬁ²';
const next = rng(42);
const cases = [];
for (let i = 0; i < 500; i += 1) {
  let title = '';
  const length = Math.floor(next() * 20);
  for (let j = 0; j < length; j += 1) {
    title += alphabet[Math.floor(next() * alphabet.length)];
  }
  const separator = ['-', '_', '.', '~'][Math.floor(next() * 4)];
  const options = next() < 0.5 ? { separator } : { separator, maxLength: Math.floor(next() * 12) };
  cases.push([title, options, reference(title, options)]);
}
process.stdout.write(JSON.stringify(cases));
