/**
 * The wait before each poll: a durable timer that a requested poll (`pollNow`, a follow-up's turn)
 * ends early. Workflow code; the schedule that sets its length is ./poll-schedule.ts.
 *
 * Why not `condition(() => requested, ms)`: that helper cancels its scope even after its timer
 * fired, and the failure it builds costs a source-mapped stack per poll (docs/decisions/0003).
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

  /**
   * Waits `ms` or until a poll is requested. Every wait starts one timer, also when a poll is
   * already requested (then cancelled in the same activation, so no command reaches the server):
   * a replay that sees a local activity's result one task earlier than the original numbers its
   * timers alike (docs/decisions/0002). A cancellation of the workflow ends the wait with its failure.
   */
  async for(ms: number, summary: string): Promise<void> {
    const scope = (this.#scope ??= new CancellationScope());
    const fired = scope.run(() => sleep(ms, { summary }));
    if (this.requested) {
      this.#cancel();
      // Its failure is the expected cancellation; the workflow's own surfaces at the next poll.
      await fired.catch(() => undefined);
      this.requested = false;
      return;
    }
    try {
      const requested = await Promise.race([fired.then(() => false), this.#requestDuringWait()]);
      if (requested) this.#cancel();
    } finally {
      // Settles this wait's own promise when the timer came first, so nothing of it stays pending.
      const wake = this.#wake;
      this.#wake = null;
      wake?.(false);
    }
    this.requested = false;
  }

  #cancel(): void {
    this.#scope?.cancel();
    this.#scope = null;
  }

  /** One condition serves every wait until a poll is requested; each wait has its own promise. */
  #requestDuringWait(): Promise<boolean> {
    this.pending ??= condition(() => this.requested)
      .then(() => {
        this.pending = null;
      })
      .then(
        () => this.#wake?.(true),
        // Rejected only by a cancellation of the workflow, which ends the wait through its timer.
        () => undefined,
      );
    return new Promise<boolean>((resolve) => {
      this.#wake = resolve;
    });
  }
}
