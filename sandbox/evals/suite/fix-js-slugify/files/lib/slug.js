'use strict';

function slugify(text, options = {}) {
  const separator = options.separator ?? '-';
  const maxLength = options.maxLength ?? Infinity;
  let slug = String(text)
    .normalize('NFC')
    .toLowerCase()
    .replace(/&/g, ' and ')
    .replace(/[^a-z0-9]+/g, separator);
  slug = slug.replace(new RegExp('^' + separator + '+'), '');
  if (slug.length > maxLength) {
    slug = slug.slice(0, maxLength);
  }
  return slug;
}

function uniqueSlug(text, taken, options = {}) {
  const separator = options.separator ?? '-';
  const base = slugify(text, options);
  let slug = base;
  let n = 1;
  while (taken.has(slug)) {
    slug = `${base}${separator}${n}`;
    n += 1;
  }
  taken.add(slug);
  return slug;
}

module.exports = { slugify, uniqueSlug };
