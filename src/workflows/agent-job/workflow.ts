/**
 * The agent-job workflow: create the agent job (or attach to one), poll it until its turn ends,
 * send follow-up messages in order, and return the final record with its prLink. The run's state,
 * handlers and steps are one object (./run.ts); this function is the order it takes them in.
 */
import { patched } from '@temporalio/workflow';
import { InvalidInputError, type AgentJobInput, type AgentJobResult } from '../../contract.js';
import { resolveInput, type ResolvedInput } from '../../input.js';
import { JobEndNotifier } from '../job-end-notification/notifier.js';
import { arrivedUnsealed } from '../unsealed-input.js';
import { AgentJobRun, type Continuation } from './run.js';
import { invalidInput, unsealedInput } from './outcomes.js';

/** Drives one agent job to its end. `carried` is set only by continue-as-new. */
export async function agentJobWorkflow(
  input: AgentJobInput,
  carried?: Continuation,
): Promise<AgentJobResult> {
  // A first run whose input arrived unsealed on a worker with a key ring fails before anything reads
  // it; the patch marker tells it from a run started before the ring (decision 0021).
  if (carried === undefined && arrivedUnsealed(input) && patched('refuse-unsealed-input')) {
    throw unsealedInput();
  }
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
    await notifier.notify(run);
    return result;
  } catch (err) {
    const failure = await run.failed(err);
    await notifier.failed(run, failure);
    throw failure;
  } finally {
    // The quota's spent and release signals must leave before the run closes, or the server drops them.
    await run.quota.settle();
  }
}

function validate(input: AgentJobInput): ResolvedInput {
  try {
    return resolveInput(input);
  } catch (err) {
    if (err instanceof InvalidInputError) throw invalidInput(err);
    throw err;
  }
}
