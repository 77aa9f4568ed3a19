/**
 * The agent-job workflow: create the agent job (or attach to one), poll it until its turn ends (one
 * poll activity per wait, retried by the server once per poll), send follow-up messages in order,
 * and return the final record with its prLink. The run's state, handlers and steps are one object
 * (./run.ts); this function is the order it takes them in.
 */
import { patched } from '@temporalio/workflow';
import { InvalidInputError, type AgentJobInput, type AgentJobResult } from '../../contract.js';
import { resolveInput, type ResolvedInput } from '../../input.js';
import { JobEndNotifier } from '../job-end-notification/notifier.js';
import { arrivedUnsealed } from '../unsealed-input.js';
import { AgentJobRun, type Continuation } from './run.js';
import { invalidInput, unsealedInput } from './outcomes.js';

export { POLLS_PER_RUN, type Continuation } from './run.js';

/** Drives one agent job to its end. `carried` is set only by continue-as-new. */
export async function agentJobWorkflow(
  input: AgentJobInput,
  carried?: Continuation,
): Promise<AgentJobResult> {
  refuseUnsealed(input, carried);
  // Validate: nothing is created from a bad input.
  const run = new AgentJobRun(input, validate(input), carried);
  // `notify`: its target is checked before anything is created, and told of the end (no commands without it).
  const notifier = new JobEndNotifier(run.input.notify, carried !== undefined);
  try {
    await notifier.checkTarget();
    const jobId = await run.createOrAttach();
    const polled = run.pollUntilDone(jobId);
    // `{ jobId, prompt }`: the prompt is a follow-up, queued once polling has started; a failed
    // send fails the workflow.
    const sent = run.promptAtStart();
    const result = await (sent === null ? polled : Promise.race([polled, sent.then(() => polled)]));
    await notifier.completed(run);
    return result;
  } catch (err) {
    await run.failed(err);
    await notifier.failed(run, err);
    throw err;
  } finally {
    // The quota's spent and release signals must leave before the run closes, or the server drops them.
    await run.quota.settle();
  }
}

/**
 * The patch that refuses an input that arrived unsealed on a worker with a payload key ring: its
 * marker tells a refused run from one started before the ring was configured (decision 0021).
 */
const REFUSE_UNSEALED_INPUT = 'refuse-unsealed-input';

/** Fails a first run whose input arrived unsealed, before anything reads it (a continued run's never is: decision 0021). */
function refuseUnsealed(input: AgentJobInput, carried: Continuation | undefined): void {
  if (carried === undefined && arrivedUnsealed(input) && patched(REFUSE_UNSEALED_INPUT))
    throw unsealedInput();
}

function validate(input: AgentJobInput): ResolvedInput {
  try {
    return resolveInput(input);
  } catch (err) {
    if (err instanceof InvalidInputError) throw invalidInput(err);
    throw err;
  }
}
