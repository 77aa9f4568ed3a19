/**
 * Keeps the failure policy (src/failure-policy/) the one place that decides what a failed call
 * does. Run by `npm run lint`; exits 1 with every finding.
 *
 * - No other file in src/ (the simulator apart: it plays the API) compares an HTTP status or an
 *   API failure type: `status === 401`, `case 503:`,
 *   `err.type === ApiFailureType.RateLimited`, `type !== 'UnreadableAnswer'`. They ask the policy instead (a verdict's flags, or a named
 *   question such as `refusesQuotaUse(type)`).
 * - docs/failure-policy.md is what `--write` generates from the policy's table, so the page and
 *   the code cannot drift.
 *
 * `tsx dev/check-failure-policy.ts --write` regenerates the page.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { ApiFailureType } from '../src/failure-policy/types.js';
import { policyPage } from './failure-policy-page.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const POLICY = 'src/failure-policy/';
const PAGE = 'docs/failure-policy.md';

const API_TYPES: ReadonlySet<string> = new Set(Object.values(ApiFailureType));
const COMPARISONS: ReadonlySet<ts.SyntaxKind> = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
  ts.SyntaxKind.LessThanToken,
  ts.SyntaxKind.LessThanEqualsToken,
  ts.SyntaxKind.GreaterThanToken,
  ts.SyntaxKind.GreaterThanEqualsToken,
]);

/** The files that must not decide: src/ but the policy itself and the simulator. */
function checkedFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'src'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return out
    .split('\n')
    .filter((file) => file.endsWith('.ts') && !file.startsWith(POLICY) && !file.startsWith('src/simulator/'));
}

/** An HTTP status literal (100 to 599). */
function isStatusLiteral(node: ts.Node): boolean {
  if (!ts.isNumericLiteral(node)) return false;
  const value = Number(node.text);
  return value >= 100 && value <= 599;
}

/** An expression that reads a status: `status`, `res.statusCode`, `err.status`. */
function readsStatus(node: ts.Node): boolean {
  const name = ts.isPropertyAccessExpression(node) ? node.name.text : ts.isIdentifier(node) ? node.text : '';
  return /status/i.test(name);
}

/** An API failure type: `ApiFailureType.X`, `FailureType.X` for an API name, or its string value. */
function isApiFailureType(node: ts.Node): boolean {
  if (ts.isStringLiteral(node)) return API_TYPES.has(node.text);
  if (!ts.isPropertyAccessExpression(node) || !ts.isIdentifier(node.expression)) return false;
  const owner = node.expression.text;
  return (owner === 'ApiFailureType' || owner === 'FailureType') && API_TYPES.has(node.name.text);
}

function findings(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const report = (node: ts.Node, what: string) => {
    const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
    found.push(`${file}:${line + 1}: ${what}: ${node.getText(source).replace(/\s+/g, ' ')}`);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node) && COMPARISONS.has(node.operatorToken.kind)) {
      const sides = [node.left, node.right];
      if (sides.some(isApiFailureType)) report(node, 'compares an API failure type');
      else if (sides.some(isStatusLiteral) && sides.some(readsStatus))
        report(node, 'compares an HTTP status');
    }
    if (ts.isSwitchStatement(node)) {
      for (const clause of node.caseBlock.clauses) {
        if (!ts.isCaseClause(clause)) continue;
        if (isApiFailureType(clause.expression)) report(clause.expression, 'switches on an API failure type');
        else if (isStatusLiteral(clause.expression) && readsStatus(node.expression)) {
          report(clause.expression, 'switches on an HTTP status');
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const write = process.argv.includes('--write');
const problems = checkedFiles().flatMap(findings);
const page = policyPage();
const current = (() => {
  try {
    return readFileSync(join(ROOT, PAGE), 'utf8');
  } catch {
    // No page yet: --write makes it, a check reports it.
    return null;
  }
})();
if (write) {
  writeFileSync(join(ROOT, PAGE), page);
} else if (current !== page) {
  problems.push(`${PAGE} does not match ${POLICY}: run \`tsx dev/check-failure-policy.ts --write\``);
}
if (problems.length > 0) {
  process.stderr.write(
    `The failure policy (${POLICY}) is the one place that decides what a failed call does:\n` +
      problems.map((problem) => `  ${problem}\n`).join(''),
  );
  process.exit(1);
}
