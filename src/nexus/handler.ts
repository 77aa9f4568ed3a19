/**
 * The `agent-jobs` Nexus service's handler, registered on the worker (`nexusServices`): the
 * operations of ./service.ts, run with the client library on the worker's own connection
 * (`getClient()`), in the worker's namespace and on its task queue (the endpoint's target).
 */
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowExecutionAlreadyStartedError, WorkflowUpdateFailedError } from '@temporalio/client';
import {
  getClient,
  operationInfo,
  startWorkflow,
  WorkflowRunOperationHandler,
  type WorkflowHandle,
} from '@temporalio/nexus';
import {
  HandlerError,
  HandlerStartOperationResult,
  OperationError,
  serviceHandler,
  type CancelOperationContext,
  type OperationHandler,
  type StartOperationContext,
} from 'nexus-rpc';
import { agentJobStartOptions, sendFollowUp } from '../client/index.js';
import { FailureType, InvalidInputError, WORKFLOW_TYPE, type AgentJobResult } from '../contract.js';
import type { agentJobWorkflow } from '../workflows/index.js';
import { arrivedUnsealed } from '../workflows/unsealed-input.js';
import {
  agentJobsService,
  type FollowUpAccepted,
  type RunAgentJobInput,
  type SendFollowUpInput,
} from './service.js';

/**
 * The key of a `runAgentJob` or `sendFollowUp` request: the caller's (a blank one is the library's
 * to refuse), else `nexus-<request ID>`, which a retried request repeats (docs/starting-jobs.md).
 * @throws {InvalidInputError} naming `key` when there is neither: every such request would get one agent job
 */
export function nexusKey(callerKey: string | undefined, requestId: string): string {
  if (callerKey !== undefined) return callerKey;
  if (requestId.trim() === '')
    throw new InvalidInputError(
      'key',
      'is required: the Nexus request carries no request ID to derive one from',
    );
  return `nexus-${requestId}`;
}

/**
 * The input without its key and priority, and the library's options: {@link nexusKey}, on the
 * worker's task queue. The input is checked to be an object first: a caller in another SDK can send
 * any JSON, and a null taken apart would be a TypeError, which the SDK reports as a retryable
 * internal error (retried until the operation times out) instead of a bad request.
 */
function withOptions<T extends Pick<RunAgentJobInput, 'key' | 'priority'>>(
  ctx: StartOperationContext,
  input: T,
) {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new InvalidInputError('input', 'must be one JSON object');
  const { key, priority, ...rest } = input;
  const options = { key: nexusKey(key, ctx.requestId), priority, taskQueue: operationInfo().taskQueue };
  return [rest, options] as const;
}

/**
 * Starts the agent-job workflow for `runAgentJob` as `startAgentJob` would (the same ID, policies
 * and restart), through the Nexus start, which attaches the caller's completion callback, also to
 * a workflow already running under the ID (USE_EXISTING).
 */
async function startJobWorkflow(
  ctx: StartOperationContext,
  input: RunAgentJobInput,
): Promise<WorkflowHandle<AgentJobResult>> {
  const start = await agentJobStartOptions(getClient(), ...withOptions(ctx, input));
  return startWorkflow<typeof agentJobWorkflow>(ctx, WORKFLOW_TYPE, start);
}

/**
 * `runAgentJob`: workflow-backed (the SDK's WorkflowRunOperationHandler). A start that the reuse
 * policy refuses because the run under the ID has completed answers at once with that run's result.
 */
class RunAgentJobOperation implements OperationHandler<RunAgentJobInput, AgentJobResult> {
  private readonly workflowRun = new WorkflowRunOperationHandler<RunAgentJobInput, AgentJobResult>(
    startJobWorkflow,
  );

  async start(
    ctx: StartOperationContext,
    input: RunAgentJobInput,
  ): Promise<HandlerStartOperationResult<AgentJobResult>> {
    refuseUnsealed(input);
    try {
      return await this.workflowRun.start(ctx, input);
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        const completed = getClient().workflow.getHandle<typeof agentJobWorkflow>(err.workflowId);
        return HandlerStartOperationResult.sync(await completed.result());
      }
      throw nexusError(err);
    }
  }

  cancel(ctx: CancelOperationContext, token: string): Promise<void> {
    return this.workflowRun.cancel(ctx, token);
  }
}

/**
 * `sendFollowUp`: synchronous, answered once the job's workflow has accepted the follow-up, not
 * when the turn ends (why: docs/starting-jobs.md, "Follow-ups").
 */
async function sendFollowUpOperation(
  ctx: StartOperationContext,
  input: SendFollowUpInput,
): Promise<FollowUpAccepted> {
  try {
    const handle = await sendFollowUp(getClient(), ...withOptions(ctx, input));
    return { workflowId: handle.workflowId, updateId: handle.updateId };
  } catch (err) {
    throw nexusError(err);
  }
}

/**
 * Refuses a start whose input arrived in plain text on a worker that seals payloads: sealed by this
 * handler's client, the workflow itself would take it (decision 0023). The mark is on the object
 * the SDK decoded, so this looks before anything copies it.
 */
function refuseUnsealed(input: unknown): void {
  if (!arrivedUnsealed(input)) return;
  const message =
    "The operation's input arrived in plain text on a worker that seals payloads (TEMPORAL_PAYLOAD_KEYS_FILE is set), " +
    "so it is stored in plain text in the caller's history already. Call again from a worker with the payload codec. " +
    'No agent job was created.';
  throw badRequest(FailureType.UnsealedInput, message);
}

/** A BAD_REQUEST (not retried) whose cause is the workflow's own failure of `type`. */
function badRequest(type: FailureType, message: string, details?: unknown[]): HandlerError {
  return new HandlerError('BAD_REQUEST', message, {
    cause: ApplicationFailure.create({ type, message, nonRetryable: true, details }),
  });
}

/**
 * What a caller can act on. Invalid input is a {@link badRequest}, `InvalidInput` naming the field;
 * a follow-up the job's workflow refused fails the operation with the workflow's reason. Anything
 * else goes to the SDK, which maps a Temporal service error to its Nexus kind (retryable or not).
 */
function nexusError(err: unknown): unknown {
  if (err instanceof InvalidInputError)
    return badRequest(FailureType.InvalidInput, err.message, [{ field: err.field }]);
  if (err instanceof WorkflowUpdateFailedError) {
    return new OperationError('failed', err.message, {
      cause: err.cause instanceof Error ? err.cause : err,
    });
  }
  return err;
}

/** The handler to register on a worker: `Worker.create({ nexusServices: [agentJobsServiceHandler] })`. */
export const agentJobsServiceHandler = serviceHandler(agentJobsService, {
  runAgentJob: new RunAgentJobOperation(),
  sendFollowUp: sendFollowUpOperation,
});
