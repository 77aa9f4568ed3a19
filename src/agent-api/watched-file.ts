/**
 * A value kept in a file (the agent API key, the Temporal API key, the codec's key ring), re-read
 * when the file changes so that a rotated secret needs no restart. A Kubernetes Secret volume is
 * updated by a symlink swap, which `fs.watch` does not reliably report, so the file is checked on
 * use: at most once per `checkIntervalMs`, a `stat` (following the symlinks: a swap shows as
 * another inode) and a read only when it changed. A file that becomes unreadable, empty or
 * malformed (a writer caught half-way) keeps the last good value. Its content never appears in a
 * message or an event: a parser's reasons name what is wrong, not the secret.
 */
import { readFileSync, statSync } from 'node:fs';

/** What a {@link WatchedFile} reports, once per change of state (not per check); never the value. */
export type WatchedFileEvent =
  | { kind: 'reloaded'; path: string }
  | { kind: 'unusable'; path: string; reason: string }
  | { kind: 'recovered'; path: string };

/** What a parser makes of a file's text: the value, or why the text holds none (without the text). */
export type Parsed<T> = { value: T } | { reason: string };

/** Options of {@link WatchedFile}. */
export interface WatchedFileOptions {
  /** Shortest time between two checks of the file on use. Default 1,000 ms. */
  checkIntervalMs?: number;
  /** Called once per change of state (a {@link WatchedFileEvent}). */
  onEvent?: (event: WatchedFileEvent) => void;
  /** Clock, for tests. */
  now?: () => number;
}

/** Why a file cannot be used at start: the reason, and the error of the read when there was one. */
interface Unusable {
  reason: string;
  cause?: unknown;
}

/**
 * A file's value, parsed by `parse` and re-read when the file changes. `same` tells a re-read that
 * gives the value already in use (reported as `recovered` after a bad spell, not `reloaded`).
 */
export class WatchedFile<T> {
  readonly path: string;
  readonly #parse: (text: string) => Parsed<T>;
  readonly #same: (a: T, b: T) => boolean;
  readonly #interval: number;
  readonly #onEvent: (event: WatchedFileEvent) => void;
  readonly #now: () => number;
  #value: T;
  #signature: string;
  #checkedAt: number;
  /** Why the file was unusable at the last check, or null while it is usable. */
  #unusable: string | null = null;

  /**
   * Reads the file once. `fail` makes the error thrown when it holds no usable value (the caller's
   * own type, e.g. an ApiKeyFileError).
   */
  constructor(
    path: string,
    parse: (text: string) => Parsed<T>,
    fail: (unusable: Unusable) => Error,
    options: WatchedFileOptions & { same?: (a: T, b: T) => boolean } = {},
  ) {
    this.path = path;
    this.#parse = parse;
    this.#same = options.same ?? Object.is;
    this.#interval = options.checkIntervalMs ?? 1_000;
    this.#onEvent = options.onEvent ?? (() => undefined);
    this.#now = options.now ?? Date.now;
    const first = this.#read();
    if ('reason' in first) throw fail(first);
    this.#value = first.value;
    this.#signature = first.signature;
    this.#checkedAt = this.#now();
  }

  /** The value now: the file is checked first when the interval has passed since the last check. */
  current(): T {
    if (this.#now() - this.#checkedAt >= this.#interval) this.refresh(false);
    return this.#value;
  }

  /** The value in use, without checking the file. */
  last(): T {
    return this.#value;
  }

  /** Checks the file, reading it when it changed (always when `force`). */
  refresh(force: boolean): void {
    this.#checkedAt = this.#now();
    if (!force) {
      const signature = this.#stat();
      if (signature === this.#signature) return;
    }
    const next = this.#read();
    if ('reason' in next) {
      // Checked every second while it lasts: report the change, not every check.
      if (next.reason !== this.#unusable) {
        this.#unusable = next.reason;
        this.#onEvent({ kind: 'unusable', path: this.path, reason: next.reason });
      }
      return;
    }
    const recovered = this.#unusable !== null;
    this.#unusable = null;
    this.#signature = next.signature;
    if (this.#same(next.value, this.#value)) {
      if (recovered) this.#onEvent({ kind: 'recovered', path: this.path });
      return;
    }
    this.#value = next.value;
    this.#onEvent({ kind: 'reloaded', path: this.path });
  }

  /** Identity of the file's current content: a swapped symlink or a rewrite changes it. */
  #stat(): string | null {
    try {
      const stat = statSync(this.path);
      return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`;
    } catch {
      // Unreadable now: a read on the next refresh reports why.
      return null;
    }
  }

  #read(): { value: T; signature: string } | Unusable {
    const signature = this.#stat();
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      return { reason: `cannot read it: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, cause: err };
    }
    const parsed = this.#parse(text);
    if ('reason' in parsed) return parsed;
    return { value: parsed.value, signature: signature ?? '' };
  }
}
