'use strict';

const path = require('node:path');
const test = require('node:test');
const assert = require('node:assert/strict');

const modulePath = path.join(process.env.WORK, 'lib', 'slug.js');
const { slugify, uniqueSlug } = require(modulePath);

// The documented behaviour, written independently.
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

test('the module is the workspace copy', () => {
  assert.equal(require.resolve(modulePath), modulePath);
});

test('accents, compatibility forms and symbols', () => {
  assert.equal(slugify('Ärger über Öl'), 'arger-uber-ol');
  assert.equal(slugify('São Paulo'), 'sao-paulo');
  assert.equal(slugify('ﬁle ＡＢＣ'), 'file-abc');
  assert.equal(slugify('Rock&Roll'), 'rock-and-roll');
  assert.equal(slugify('--Hello--'), 'hello');
  assert.equal(slugify('!!!'), '');
  assert.equal(slugify('C++ 2023: what\'s new?'), 'c-2023-what-s-new');
});

test('separators that are special in regular expressions', () => {
  assert.equal(slugify('Hello, World. Again', { separator: '.' }), 'hello.world.again');
  assert.equal(slugify('...dots...', { separator: '.' }), 'dots');
  assert.equal(slugify(' a b ', { separator: '+' }), 'a+b');
  assert.equal(slugify('a b c', { separator: '::' }), 'a::b::c');
});

test('maxLength cuts and trims', () => {
  assert.equal(slugify('hello world', { maxLength: 5 }), 'hello');
  assert.equal(slugify('hello world', { maxLength: 6 }), 'hello');
  assert.equal(slugify('hello world', { maxLength: 7 }), 'hello-w');
  assert.equal(slugify('hello world', { maxLength: 0 }), '');
  assert.equal(slugify('  Hi  ', { maxLength: 50 }), 'hi');
  assert.equal(slugify('a_b_c', { separator: '_', maxLength: 2 }), 'a');
});

test('uniqueSlug skips taken slugs and uses the separator', () => {
  const taken = new Set(['post', 'post-2']);
  assert.equal(uniqueSlug('Post', taken), 'post-3');
  assert.ok(taken.has('post-3'));
  assert.equal(uniqueSlug('Post', taken), 'post-4');
  const other = new Set();
  assert.equal(uniqueSlug('A b', other, { separator: '_' }), 'a_b');
  assert.equal(uniqueSlug('a-B', other, { separator: '_' }), 'a_b_2');
  assert.equal(uniqueSlug('Fresh', other), 'fresh');
});

test('random titles match the documented rules', () => {
  const alphabet = 'abcXYZ019 -_.,!&éÉñÑüßøœ\tﬁ²';
  const next = rng(42);
  for (let i = 0; i < 500; i += 1) {
    let title = '';
    const length = Math.floor(next() * 20);
    for (let j = 0; j < length; j += 1) {
      title += alphabet[Math.floor(next() * alphabet.length)];
    }
    const separator = ['-', '_', '.', '~'][Math.floor(next() * 4)];
    const options = next() < 0.5 ? { separator } : { separator, maxLength: Math.floor(next() * 12) };
    assert.equal(slugify(title, options), reference(title, options), JSON.stringify([title, options]));
  }
});
