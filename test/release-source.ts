/**
 * The sources of a released version, for what must run that version's own code: its captured
 * histories replay on its own build (PINNED runs finish there), and the rollout from it runs its
 * worker. Extracted from git at test time into a temporary directory that shares this checkout's
 * node_modules (a release changes no dependency the tests load; the test that uses it says so if
 * one did).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onCleanup, ROOT } from './harness.js';

/** Releases whose code a test runs: their commits (tagged `v<version>` where the repository carries tags). */
export const RELEASES = {
  /** 1.1.0: "Version 1.1.0", the rollout's first version and the upgrade check's refusal. */
  '1.1': '82bfbaf',
  /** 1.2.0: "Version 1.2.0", the last release with the frozen quota of 1.0 and 1.1 (decision 0022). */
  '1.2': 'e302acd',
} as const;

/** A directory holding the sources of `release` (removed when the test ends). */
export function releaseSource(release: keyof typeof RELEASES): string {
  const commit = RELEASES[release];
  if (!hasCommit(commit)) {
    // A shallow clone (CI's may be): fetch the history from where it was cloned, once.
    try {
      execFileSync('git', ['fetch', '--quiet', '--unshallow'], { cwd: ROOT, stdio: 'ignore' });
    } catch {
      // Not shallow, or no origin to fetch from: the check below says what is missing.
    }
  }
  if (!hasCommit(commit)) {
    throw new Error(
      `release ${release} (commit ${commit}) is not in this clone's history: clone the repository with its history (not --depth 1) to run this test`,
    );
  }
  const dir = mkdtempSync(join(tmpdir(), `agent-job-release-${release}-`));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('sh', ['-c', `git archive ${commit} | tar -x -C "${dir}"`], { cwd: ROOT });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

function hasCommit(commit: string): boolean {
  try {
    execFileSync('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: ROOT, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
