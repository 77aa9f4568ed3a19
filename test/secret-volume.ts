/** A Kubernetes Secret volume on disk, for the key rotation tests. */
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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
