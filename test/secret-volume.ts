/** A Kubernetes Secret volume on disk, for the key rotation tests. */
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FileApiKey } from '../src/agent-api/index.js';
import type { WatchedFileEvent } from '../src/agent-api/watched-file.js';

/**
 * A Secret volume as the kubelet writes it: `key -> ..data/key`, `..data -> ..<version>`. An update
 * writes a new version directory and swaps `..data` in one rename, so a reader never sees half a
 * file, and a watcher of `key` itself sees no event.
 */
export class SecretVolume {
  /** The directory mounted in the pod. */
  readonly dir: string;
  /** The file the worker reads (AGENT_API_KEY_FILE). */
  readonly path: string;
  #version = 0;

  constructor(parent: string, key: string) {
    this.dir = mkdtempSync(join(parent, 'secret-'));
    this.path = join(this.dir, 'key');
    this.swap(key);
    symlinkSync(join('..data', 'key'), this.path);
  }

  /** Replaces the key as a Secret update does. */
  swap(content: string): void {
    this.#version += 1;
    const version = `..v${this.#version}`;
    mkdirSync(join(this.dir, version));
    writeFileSync(join(this.dir, version, 'key'), content);
    symlinkSync(version, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
}

/** A key source on a file, read on a fake clock, with the events it reported. */
export interface WatchedKeyFile {
  source: FileApiKey;
  events: WatchedFileEvent[];
  /** The time the source reads, in ms: a test moves it. */
  clock: { ms: number };
}

/** A {@link FileApiKey} on `path` that checks at most every `checkIntervalMs` of a fake clock starting at 0. */
export function watchKeyFile(path: string, checkIntervalMs: number): WatchedKeyFile {
  const clock = { ms: 0 };
  const events: WatchedFileEvent[] = [];
  const source = new FileApiKey(path, {
    checkIntervalMs,
    now: () => clock.ms,
    onEvent: (e) => events.push(e),
  });
  return { source, events, clock };
}
