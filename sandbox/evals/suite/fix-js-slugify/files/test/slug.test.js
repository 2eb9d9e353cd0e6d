'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { slugify, uniqueSlug } = require('../lib/slug');

test('lower-cases and joins words', () => {
  assert.equal(slugify('Hello World'), 'hello-world');
});

test('drops accents and reads & as and', () => {
  assert.equal(slugify('  Crème Brûlée & Café!  '), 'creme-brulee-and-cafe');
});

test('custom separator', () => {
  assert.equal(slugify('Hello World', { separator: '_' }), 'hello_world');
});

test('maxLength never leaves a separator at the end', () => {
  assert.equal(slugify('The quick brown fox', { maxLength: 10 }), 'the-quick');
});

test('uniqueSlug counts from 2', () => {
  const taken = new Set();
  assert.equal(uniqueSlug('Post', taken), 'post');
  assert.equal(uniqueSlug('Post', taken), 'post-2');
  assert.equal(uniqueSlug('post!', taken), 'post-3');
});
