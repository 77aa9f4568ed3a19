/**
 * The waits of the poll loop: a durable timer, or a poll activity polling by server-side retry,
 * either of which a requested poll (`pollNow`, a follow-up's turn) ends at once. Why not
 * `condition(() => requested, ms)`: docs/decisions/0003-the-poll-wait.md. Workflow code.
 */
import { CancellationScope, condition, sleep } from '@temporalio/workflow';

/** The waits of one run. */
export class PollWait {
  constructor(
    /** A poll is wanted at once: the wait in progress ends, and the next one ends as it starts. */
    public requested = false,
  ) {}

  /** One scope serves the run's waits until a requested poll cancels it (the SDK never unlinks one). */
  #scope: CancellationScope | null = null;
  /** The shared condition that wakes the wait in progress; pending while no poll is requested. */
  private pending: Promise<void> | null = null;
  /** Ends the wait in progress: true when a poll was requested. */
  #wake: ((requested: boolean) => void) | null = null;

  /** Asks for a poll now. */
  request(): void {
    this.requested = true;
  }

  /** Waits `ms` on a durable timer, or until a poll is requested (then no timer is started at all). */
  async for(ms: number, summary: string): Promise<void> {
    if (!this.requested) await this.#untilRequested(() => sleep(ms, { summary }));
    this.requested = false;
  }

  /** Runs a poll activity until it returns, or until a poll is requested: then it is cancelled (TRY_CANCEL) and the result is `null`. */
  async poll<T>(run: () => Promise<T>): Promise<{ value: T } | null> {
    if (this.requested) return null;
    return this.#untilRequested(run);
  }

  /** Runs `start` in the shared scope until it settles or a poll is requested (null). */
  async #untilRequested<T>(start: () => Promise<T>): Promise<{ value: T } | null> {
    const scope = (this.#scope ??= new CancellationScope());
    const work = scope.run(start);
    try {
      const outcome = await Promise.race([work.then((value) => ({ value })), this.#requestDuringWait()]);
      if (outcome !== null) return outcome;
      this.#scope?.cancel();
      this.#scope = null;
      // Its failure is the expected cancellation; the workflow's own surfaces at the next wait.
      await work.catch(() => undefined);
      return null;
    } finally {
      // Settles this wait's own promise when the work came first, so nothing of it stays pending.
      const wake = this.#wake;
      this.#wake = null;
      wake?.(false);
    }
  }

  /** One condition serves every wait until a poll is requested; each wait's own promise settles only then. */
  #requestDuringWait(): Promise<null> {
    this.pending ??= condition(() => this.requested)
      .then(() => {
        this.pending = null;
      })
      .then(
        () => this.#wake?.(true),
        // Rejected only by a cancellation of the workflow, which ends the wait through its work.
        () => undefined,
      );
    return new Promise<null>((resolve) => {
      this.#wake = (requested) => {
        if (requested) resolve(null);
      };
    });
  }
}
