// TypeScript to JavaScript without type checking (as tsx, SandboxFusion's runner,
// does): `node ts_transpile.js FILE.ts...` writes FILE.js beside each one, or
// prints the syntax errors and exits 1 (the compile verdict).
"use strict";
const fs = require("fs");
const ts = require("typescript");

let failed = false;
for (const file of process.argv.slice(2)) {
  const source = fs.readFileSync(file, "utf8");
  const out = ts.transpileModule(source, {
    fileName: file,
    reportDiagnostics: true,
    compilerOptions: {
      target: ts.ScriptTarget.ES2021,
      module: ts.ModuleKind.CommonJS,
      esModuleInterop: true,
    },
  });
  const errors = (out.diagnostics || []).filter(
    (d) => d.category === ts.DiagnosticCategory.Error,
  );
  for (const d of errors) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (d.file && d.start !== undefined) {
      const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
      process.stderr.write(`${file}(${line + 1},${character + 1}): error TS${d.code}: ${message}\n`);
    } else {
      process.stderr.write(`${file}: error TS${d.code}: ${message}\n`);
    }
  }
  if (errors.length) {
    failed = true;
    continue;
  }
  fs.writeFileSync(file.replace(/\.ts$/, ".js"), out.outputText);
}
process.exit(failed ? 1 : 0);
