/**
 * Where the API client gets its admin API key: a fixed string, or a file that is re-read when it
 * changes, so a rotated key is picked up without a restart.
 *
 * A Kubernetes Secret mounted as a volume is updated by an atomic symlink swap (`..data` is
 * pointed at a new directory), which `fs.watch` on the file does not reliably report. So the file
 * is checked on use instead: at most once per `checkIntervalMs`, a `stat` (which follows the
 * symlinks, so a swap shows as another inode) and a read only when something changed. A refused
 * key (HTTP 401) makes the client ask for a fresh read at once, see {@link ApiKeySource.afterRefusal}.
 *
 * No key ever appears in a message or an event of this module.
 */
import { readFileSync, statSync } from 'node:fs';
import { AgentJobError, ErrorName } from '../errors.js';

/** An HTTP header value made of visible ASCII only, which is what an API key is. */
const TOKEN = /^[\x21-\x7e]+$/;

/** The key a client sends, and a fresher one after the API refused it. */
export interface ApiKeySource {
  /** The key to send now. */
  current(): string;
  /**
   * The key to retry with after the API refused `refused`, or null when there is no other key
   * (the refusal is then final). A file source re-reads the file once for this.
   */
  afterRefusal(refused: string): string | null;
  /** Every key this source has handed out, so that an echo of an old one is redacted too. */
  known(): readonly string[];
}

/** A key that never changes (`AGENT_API_KEY`). */
export function staticApiKey(key: string): ApiKeySource {
  return { current: () => key, afterRefusal: () => null, known: () => [key] };
}

/**
 * What a {@link FileApiKey} reports, once per change of state (not once per check): a new key in
 * use, the file unusable (again only when the reason changes), or usable again with the same key.
 * Never carries the key.
 */
export type ApiKeyFileEvent =
  | { kind: 'reloaded'; path: string }
  | { kind: 'unusable'; path: string; reason: string }
  | { kind: 'recovered'; path: string };

/** Options of {@link FileApiKey}. */
export interface FileApiKeyOptions {
  /** Shortest time between two checks of the file on use. Default 1,000 ms. */
  checkIntervalMs?: number;
  /**
   * Called when a new key is in use, when the file becomes unusable (the old key stays), and when
   * it is usable again: once per change, however often the file is checked meanwhile.
   */
  onEvent?: (event: ApiKeyFileEvent) => void;
  /** Clock, for tests. */
  now?: () => number;
}

/** The key file could not be read at start, or held no usable key. The message names the file only. */
export class ApiKeyFileError extends AgentJobError {
  constructor(
    readonly path: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorName.ApiKeyFile, `${path}: ${reason}`, options);
  }
}

/** Default shortest time between two checks of the key file. */
export const DEFAULT_KEY_CHECK_INTERVAL_MS = 1_000;

/**
 * A key kept in a file (`AGENT_API_KEY_FILE`), re-read when the file changes. A file that
 * becomes unreadable, empty or malformed (a writer caught half-way) keeps the last good key and is
 * tried again on the next check.
 */
export class FileApiKey implements ApiKeySource {
  readonly #path: string;
  readonly #interval: number;
  readonly #onEvent: (event: ApiKeyFileEvent) => void;
  readonly #now: () => number;
  readonly #known: string[] = [];
  #key: string;
  #signature: string;
  #checkedAt: number;
  /** Why the file was unusable at the last check, or null while it is usable. */
  #unusable: string | null = null;

  /** Reads the file once. @throws {ApiKeyFileError} when it has no usable key */
  constructor(path: string, options: FileApiKeyOptions = {}) {
    this.#path = path;
    this.#interval = options.checkIntervalMs ?? DEFAULT_KEY_CHECK_INTERVAL_MS;
    this.#onEvent = options.onEvent ?? (() => undefined);
    this.#now = options.now ?? Date.now;
    const first = this.#read();
    if ('reason' in first) throw new ApiKeyFileError(path, first.reason, { cause: first.cause });
    this.#key = first.key;
    this.#signature = first.signature;
    this.#known.push(first.key);
    this.#checkedAt = this.#now();
  }

  current(): string {
    if (this.#now() - this.#checkedAt >= this.#interval) this.#refresh(false);
    return this.#key;
  }

  afterRefusal(refused: string): string | null {
    // Another call may have loaded the new key since this one was sent.
    if (this.#key === refused) this.#refresh(true);
    return this.#key === refused ? null : this.#key;
  }

  known(): readonly string[] {
    return this.#known;
  }

  /** Checks the file, reading it when it changed (always when `force`). */
  #refresh(force: boolean): void {
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
        this.#onEvent({ kind: 'unusable', path: this.#path, reason: next.reason });
      }
      return;
    }
    const recovered = this.#unusable !== null;
    this.#unusable = null;
    this.#signature = next.signature;
    if (next.key === this.#key) {
      if (recovered) this.#onEvent({ kind: 'recovered', path: this.#path });
      return;
    }
    this.#key = next.key;
    if (!this.#known.includes(next.key)) this.#known.push(next.key);
    this.#onEvent({ kind: 'reloaded', path: this.#path });
  }

  /** Identity of the file's current content: a swapped symlink or a rewrite changes it. */
  #stat(): string | null {
    try {
      const stat = statSync(this.#path);
      return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`;
    } catch {
      // Unreadable now: a read on the next refresh reports why.
      return null;
    }
  }

  #read(): { key: string; signature: string } | { reason: string; cause?: unknown } {
    const signature = this.#stat();
    let text: string;
    try {
      text = readFileSync(this.#path, 'utf8');
    } catch (err) {
      return { reason: `cannot read it: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, cause: err };
    }
    const key = text.trim();
    if (key === '') return { reason: 'it is empty' };
    if (!TOKEN.test(key)) return { reason: 'the key must be visible ASCII characters without white space' };
    return { key, signature: signature ?? '' };
  }
}
