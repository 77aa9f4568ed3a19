/**
 * Two rules about imports that ESLint does not check here, run by `npm run lint`:
 *
 * - No import circle anywhere in the project's TypeScript (type-only imports count: a circle of
 *   types still ties the modules into one that must be read and changed together).
 * - No SDK internals in src/: nothing from `@temporalio/<package>/lib/...`, which the SDK may change
 *   in any release. Tests and the benchmark may load histories the way Temporal's replay docs show.
 *
 * Exits 1 with each circle and each internal import named.
 */
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FOLDERS = ['src', 'test', 'bench', 'dev', 'examples'];

/** The repository's TypeScript files, as git lists them (tracked or new, not ignored). */
function sourceFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', ...FOLDERS], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return out.split('\n').filter((file) => /\.(ts|mts|tsx)$/.test(file) && !file.endsWith('.d.ts'));
}

/** A relative specifier (`./x.js`, `../y.ts`) as a file of the project, or null when none. */
function resolveRelative(from: string, specifier: string, files: Set<string>): string | null {
  const base = relative(ROOT, resolve(ROOT, dirname(from), specifier)).replace(/\.(js|mjs|ts)$/, '');
  for (const candidate of [`${base}.ts`, `${base}.mts`, `${base}.tsx`, join(base, 'index.ts')]) {
    if (files.has(candidate)) return candidate;
  }
  return null;
}

/** The strongly connected components of more than one file (or a file importing itself). */
function circles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    indexOf.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indexOf.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, indexOf.get(next)!));
      }
    }
    if (low.get(node) === indexOf.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!indexOf.has(node)) visit(node);
  return found;
}

const files = sourceFiles();
const known = new Set(files);
const graph = new Map<string, string[]>();
const internals: string[] = [];
for (const file of files) {
  const { importedFiles } = ts.preProcessFile(readFileSync(join(ROOT, file), 'utf8'), true, true);
  const edges: string[] = [];
  for (const { fileName } of importedFiles) {
    if (fileName.startsWith('.')) {
      const target = resolveRelative(file, fileName, known);
      if (target !== null) edges.push(target);
    } else if (file.startsWith('src/') && /^@temporalio\/[^/]+\/lib\//.test(fileName)) {
      internals.push(`${file}: imports ${fileName}, an SDK internal; use the package's public API`);
    }
  }
  graph.set(file, edges);
}

const found = circles(graph);
for (const circle of found) console.error(`import circle: ${circle.join(' <-> ')}`);
for (const line of internals) console.error(line);
if (found.length > 0 || internals.length > 0) process.exit(1);
console.log(`imports: ${files.length} files, no circle, no SDK internals in src/`);
