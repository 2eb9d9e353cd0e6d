placeholder for src/dist/index.js
