/**
 * When this worker last had an answer other than a refused key from each project: a create whose
 * key is refused waits for a rotation only when the key worked for the project lately (else it is
 * the wrong key, and fails at once). One key source per worker process, so per project is enough.
 */
export class KeyAnswers {
  readonly #at = new Map<string, number>();

  /** The API answered for `projectId` with something other than 401/403. */
  answered(projectId: string): void {
    this.#at.set(projectId, Date.now());
  }

  /** Milliseconds since that answer, or null when none came. */
  agoMs(projectId: string): number | null {
    const at = this.#at.get(projectId);
    return at === undefined ? null : Date.now() - at;
  }
}
