'use strict';

function trimSeparator(slug, separator) {
  if (!separator) {
    return slug;
  }
  while (slug.startsWith(separator)) {
    slug = slug.slice(separator.length);
  }
  while (slug.endsWith(separator)) {
    slug = slug.slice(0, slug.length - separator.length);
  }
  return slug;
}

function slugify(text, options = {}) {
  const separator = options.separator ?? '-';
  const maxLength = options.maxLength ?? Infinity;
  let slug = String(text)
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/&/g, ' and ')
    .split(/[^a-z0-9]+/)
    .filter(Boolean)
    .join(separator);
  if (slug.length > maxLength) {
    slug = slug.slice(0, maxLength);
  }
  return trimSeparator(slug, separator);
}

function uniqueSlug(text, taken, options = {}) {
  const separator = options.separator ?? '-';
  const base = slugify(text, options);
  let slug = base;
  let n = 2;
  while (taken.has(slug)) {
    slug = `${base}${separator}${n}`;
    n += 1;
  }
  taken.add(slug);
  return slug;
}

module.exports = { slugify, uniqueSlug };
