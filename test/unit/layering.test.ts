// The product never depends on its tests: no module under src/ imports anything under test/ or
// bench/ (the `local` demo, which once did, is product code in src/local).
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const repoRoot = resolve(import.meta.dirname, '../..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

test('nothing under src/ imports test/ or bench/', () => {
  const offenders: string[] = [];
  for (const file of sourceFiles(join(repoRoot, 'src'))) {
    const text = readFileSync(file, 'utf8');
    // Static imports, re-exports and dynamic import() / new URL() of relative paths.
    for (const [, specifier] of text.matchAll(
      /(?:from\s+|import\s*\(\s*|new URL\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g,
    )) {
      const target = relative(repoRoot, resolve(file, '..', specifier!));
      if (/^(test|bench)\//.test(target)) offenders.push(`${relative(repoRoot, file)} → ${target}`);
    }
  }
  expect(offenders).toEqual([]);
});
