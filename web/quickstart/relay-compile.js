// Compiles relay.js's graphql tags into __generated__/ with relay-compiler:
//   node web/quickstart/relay-compile.js              writes the artifacts
//   node web/quickstart/relay-compile.js --validate   fails if they are not what it would write
// relay-compiler takes its schema only from a *.graphql file (it rejects schema.graphqls and
// does not follow symlinks), so this gives it a fresh copy of the gateway's schema each run.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'relay-schema-'));
const config = join(here, `relay.config.${process.pid}.json`);
try {
  copyFileSync(join(here, '..', '..', 'schema.graphqls'), join(tmp, 'schema.graphql'));
  writeFileSync(config, JSON.stringify({
    src: '.',
    schema: join(tmp, 'schema.graphql'),
    language: 'javascript',
    eagerEsModules: false, // CommonJS artifacts (__generated__/package.json): Node resolves their require()s
    artifactDirectory: '__generated__',
    excludes: ['**/node_modules/**', '**/__generated__/**'],
  }));
  execFileSync(join(here, '..', '..', 'node_modules', '.bin', 'relay-compiler'),
    [config, '--output', 'quiet-with-errors', ...process.argv.slice(2)], { cwd: here, stdio: 'inherit' });
} catch (err) {
  process.exitCode = err.status || 1;
} finally {
  rmSync(config, { force: true });
  rmSync(tmp, { recursive: true, force: true });
}
