/**
 * Where the API client gets its admin API key: a fixed string, or a {@link WatchedFile}, read
 * afresh at once when the API refuses the key ({@link ApiKeySource.afterRefusal}). No key ever
 * appears in a message or an event of this module.
 */
import { AgentJobError, ErrorName } from '../errors.js';
import { WatchedFile, type Parsed, type WatchedFileOptions } from './watched-file.js';

/** An HTTP header value made of visible ASCII only, which is what an API key or idempotency key is. */
export const TOKEN = /^[\x21-\x7e]+$/;

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

/** What the key file holds: one key of visible ASCII, white space around it ignored. */
function parseKey(text: string): Parsed<string> {
  const key = text.trim();
  if (key === '') return { reason: 'it is empty' };
  if (!TOKEN.test(key)) return { reason: 'the key must be visible ASCII characters without white space' };
  return { value: key };
}

/** A key kept in a file (`AGENT_API_KEY_FILE`), re-read when the file changes (a {@link WatchedFile}). */
export class FileApiKey implements ApiKeySource {
  readonly #file: WatchedFile<string>;
  readonly #known: string[] = [];

  /** Reads the file once. @throws {ApiKeyFileError} when it has no usable key */
  constructor(path: string, options: WatchedFileOptions = {}) {
    this.#file = new WatchedFile(
      path,
      parseKey,
      ({ reason, cause }) => new ApiKeyFileError(path, reason, { cause }),
      options,
    );
    this.#known.push(this.#file.current());
  }

  current(): string {
    return this.#remember(this.#file.current());
  }

  afterRefusal(refused: string): string | null {
    // Another call may have loaded the new key since this one was sent.
    if (this.#file.last() === refused) this.#file.refresh(true);
    const key = this.#remember(this.#file.current());
    return key === refused ? null : key;
  }

  known(): readonly string[] {
    return this.#known;
  }

  #remember(key: string): string {
    if (!this.#known.includes(key)) this.#known.push(key);
    return key;
  }
}
