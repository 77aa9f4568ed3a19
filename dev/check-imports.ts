/**
 * Three rules about imports that ESLint does not check here, run by `npm run lint`:
 *
 * - Imports in src/ run down {@link LAYERS}: a module imports only from its own layer or the ones
 *   below it, and every folder and file of src/ is in the table (a new one is placed on purpose),
 *   a folder whole, in one layer. The simulator stands apart: nothing else in src/ imports it, and
 *   it imports only the two lowest layers (it plays the API; it is not part of the worker).
 * - No import circle anywhere in the project's TypeScript (type-only imports count: a circle of
 *   types still ties the modules into one that must be read and changed together), and none
 *   between the folders of src/ either: two folders of one layer that import each other are one
 *   concern split in two, or a lower one that has not been moved down.
 * - No SDK internals in src/: nothing from `@temporalio/<package>/lib/...`, which the SDK may change
 *   in any release. Tests and the benchmark may load histories the way Temporal's replay docs show.
 *
 * Exits 1 with each upward import, unplaced module, circle and internal import named.
 */
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The layers of src/, lowest first: a folder of src/ (ending in `/`) or a file directly in it.
 * Type-only imports count, as for circles: a type from above still ties a module to the code above it.
 */
const LAYERS: ReadonlyArray<{ name: string; members: string[] }> = [
  // What a failure means (src/failure-policy/) is read by the client and everything above it, and
  // reads nothing of theirs.
  {
    name: 'failure policy and API client',
    members: ['src/failure-policy/', 'src/errors.ts', 'src/agent-api/'],
  },
  {
    name: 'contract, IDs, durations and pure decisions',
    members: [
      'src/contract.ts',
      'src/ids.ts',
      'src/duration.ts',
      'src/escape.ts',
      'src/input.ts',
      'src/poll-schedule.ts',
      'src/priority.ts',
      // The quota's settings and messages: the quota workflow, the activity that takes from it and
      // the worker's configuration all speak them.
      'src/quota/',
    ],
  },
  {
    // Job-end notices (src/notify/): the receivers' HTTP client, signature and delivery policy, used by the activities.
    name: 'workflows and activities',
    members: ['src/workflows/', 'src/activities/', 'src/notify/'],
  },
  {
    // The payload codec reads its keys the way the API keys are read, and is used by every process
    // that talks to Temporal; it knows nothing of workflows, configuration or the worker.
    name: 'payload codec',
    members: ['src/payload-codec/'],
  },
  {
    name: 'observability and configuration',
    // The worker's sizing from its memory limit and its build ID from its bundle are what the
    // configuration derives its settings from: they sit in its folder, below the worker that uses them.
    members: ['src/observability/', 'src/config/', 'src/temporal-api-key.ts'],
  },
  {
    name: 'worker, client, starter and Nexus',
    members: [
      'src/worker.ts',
      'src/worker/',
      'src/codec-server.ts',
      'src/client/',
      'src/starter.ts',
      'src/starter/',
      'src/nexus/',
      'src/index.ts',
      'src/action/',
    ],
  },
];

/** The simulator's folder: apart from the layers. */
const SIMULATOR = 'src/simulator/';

/** The folder of src/ a file is in (`src/worker/`), or the file itself when it is directly in src/. */
function folderOf(file: string): string {
  const [root, top, ...rest] = file.split('/');
  return rest.length > 0 ? `${root}/${top}/` : file;
}

/** The layer index of a file of src/, or null when the table does not place its folder. */
function layerOf(file: string): number | null {
  const index = LAYERS.findIndex(({ members }) => members.includes(folderOf(file)));
  return index === -1 ? null : index;
}

/** What breaks the layering: an edge from `file` to `target` (both files of the project). */
function layerProblem(file: string, target: string): string | null {
  if (!file.startsWith('src/') || !target.startsWith('src/')) return null;
  const fromSimulator = file.startsWith(SIMULATOR);
  if (target.startsWith(SIMULATOR)) {
    return fromSimulator ? null : `${file} imports the simulator (${target}): nothing in the worker may`;
  }
  const to = layerOf(target);
  if (to === null) return null;
  const from = fromSimulator ? 1 : layerOf(file);
  if (from === null || to <= from) return null;
  const name = (index: number) => LAYERS[index]?.name ?? '';
  return `${file} (${fromSimulator ? 'the simulator' : name(from)}) imports up: ${target} (${name(to)})`;
}

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
/** Folder to folder of src/, each with one import that makes the edge, to name in a report. */
const folders = new Map<string, Map<string, string>>();
const internals: string[] = [];
const layering = LAYERS.flatMap(({ members }) => members)
  .filter((member) => folderOf(member) !== member)
  .map(
    (member) => `LAYERS places ${member}: a layer takes a folder of src/ whole, or a file directly in src/`,
  );
for (const file of files) {
  if (file.startsWith('src/') && !file.startsWith(SIMULATOR) && layerOf(file) === null) {
    layering.push(`${file} is in no layer: add ${folderOf(file)} to LAYERS in dev/check-imports.ts`);
  }
  const { importedFiles } = ts.preProcessFile(readFileSync(join(ROOT, file), 'utf8'), true, true);
  const edges: string[] = [];
  for (const { fileName } of importedFiles) {
    if (fileName.startsWith('.')) {
      const target = resolveRelative(file, fileName, known);
      if (target === null) continue;
      edges.push(target);
      const problem = layerProblem(file, target);
      if (problem !== null) layering.push(problem);
      const [from, to] = [folderOf(file), folderOf(target)];
      if (file.startsWith('src/') && target.startsWith('src/') && from !== to) {
        if (!folders.has(from)) folders.set(from, new Map());
        if (!folders.get(from)?.has(to)) folders.get(from)?.set(to, `${file} -> ${target}`);
      }
    } else if (file.startsWith('src/') && /^@temporalio\/[^/]+\/lib\//.test(fileName)) {
      internals.push(`${file}: imports ${fileName}, an SDK internal; use the package's public API`);
    }
  }
  graph.set(file, edges);
}

const found = circles(graph);
for (const circle of found) console.error(`import circle: ${circle.join(' <-> ')}`);
const folderGraph = new Map([...folders].map(([from, to]) => [from, [...to.keys()]]));
const folderCircles = circles(folderGraph);
for (const circle of folderCircles) {
  const closing = circle.flatMap((from) => circle.flatMap((to) => folders.get(from)?.get(to) ?? []));
  console.error(`folder circle in src/: ${circle.join(' <-> ')} (${closing.join(', ')})`);
}
for (const line of [...internals, ...new Set(layering)]) console.error(line);
const failures = found.length + folderCircles.length + internals.length + layering.length;
if (failures > 0) process.exit(1);
console.log(
  `imports: ${files.length} files, no circle of files or of src/ folders, no SDK internals in src/, src/ imports run down its ${LAYERS.length} layers`,
);
