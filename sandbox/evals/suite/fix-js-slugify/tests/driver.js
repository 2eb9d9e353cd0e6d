'use strict';
// Runs the workspace's lib/slug.js on the calls given as JSON on stdin and
// prints what it returned as JSON. Nothing is judged here: this process holds
// the agent's code, so the test file compares the answers from outside it.
//   input:  [{"slugify": [text, options?]} | {"unique": {"taken": [...], "calls": [[text, options?], ...]}}]
//   output: {"resolved": bool, "results": [slug | {"slugs": [...], "taken": [...]}]}

const fs = require('node:fs');
const path = require('node:path');

const modulePath = path.join(process.env.WORK, 'lib', 'slug.js');
const { slugify, uniqueSlug } = require(modulePath);
const jobs = JSON.parse(fs.readFileSync(0, 'utf8'));
const results = jobs.map((job) => {
  if (job.slugify) return slugify(...job.slugify);
  const taken = new Set(job.unique.taken);
  const slugs = job.unique.calls.map(([text, options]) => uniqueSlug(text, taken, options));
  return { slugs, taken: [...taken].sort() };
});
process.stdout.write(JSON.stringify({ resolved: require.resolve(modulePath) === modulePath, results }));
