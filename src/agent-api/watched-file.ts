/**
 * A value kept in a file (a key, a key ring) and re-read when the file changes, so that a rotated
 * secret needs no restart. The agent API key, the Temporal API key and the payload codec's key ring
 * are all read through it.
 *
 * A Kubernetes Secret mounted as a volume is updated by an atomic symlink swap (`..data` is
 * pointed at a new directory), which `fs.watch` on the file does not reliably report. So the file
 * is checked on use instead: at most once per `checkIntervalMs`, a `stat` (which follows the
 * symlinks, so a swap shows as another inode) and a read only when something changed. A file that
 * becomes unreadable, empty or malformed (a writer caught half-way) keeps the last good value and
 * is tried again on the next check.
 *
 * The file's content never appears in a message or an event of this module: a parser's reasons
 * name what is wrong, not the secret.
 */
import { readFileSync, statSync } from 'node:fs';

/**
 * What a {@link WatchedFile} reports, once per change of state (not once per check): a new value
 * in use, the file unusable (again only when the reason changes), or usable again with the same
 * value. Never carries the value.
 */
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
  /**
   * Called when a new value is in use, when the file becomes unusable (the old value stays), and
   * when it is usable again: once per change, however often the file is checked meanwhile.
   */
  onEvent?: (event: WatchedFileEvent) => void;
  /** Clock, for tests. */
  now?: () => number;
}

/** Default shortest time between two checks of a watched file. */
export const DEFAULT_FILE_CHECK_INTERVAL_MS = 1_000;

/** Why a file cannot be used at start: the reason, and the error of the read when there was one. */
export interface Unusable {
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
    this.#interval = options.checkIntervalMs ?? DEFAULT_FILE_CHECK_INTERVAL_MS;
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
