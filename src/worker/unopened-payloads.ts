/**
 * What the worker says when a payload it was given does not open
 * (docs/decisions/0023-sealed-payloads-bound-and-named.md): the SDK's own line names the error's
 * type only, so this one adds which workflow, which key ID and why. docs/operator-actions.md says what to do.
 */
import type { Logger, MetricMeter } from '@temporalio/common';
import type { OnUnopened } from '../payload-codec/index.js';

/** Workflows remembered as counted; past it the set starts again (a stuck one may be counted twice). */
const MAX_REMEMBERED = 10_000;

/** The codec's `onUnopened`: an ERROR line per payload, and each workflow counted once per process by reason. */
export function reportUnopenedPayloads(logger: Logger, meter: MetricMeter): OnUnopened {
  const counter = meter.createCounter(
    'agent_job_payload_unopened_workflows',
    'workflows',
    'Workflows with a payload this worker cannot open, by reason; each retries its task until the ring is fixed',
  );
  const counted = new Set<string>();
  return (err, context) => {
    logger.error('payload does not open', {
      reason: err.reason,
      keyId: err.keyId,
      owner: context?.type ?? 'unknown',
      namespace: context?.namespace,
      workflowId: context?.workflowId,
      activityId: context?.type === 'activity' ? context.activityId : undefined,
    });
    if (context?.type !== 'workflow') return;
    const workflow = `${context.namespace}/${context.workflowId}`;
    if (counted.has(workflow)) return;
    if (counted.size >= MAX_REMEMBERED) counted.clear();
    counted.add(workflow);
    counter.add(1, { reason: err.reason });
  };
}
