/** Following a started workflow: its progress as it changes, its result, and its UI page. */
import { statusQuery, type AgentJobProgress } from '../contract.js';
import { terminalText } from '../escape.js';
import { unopenedPayload } from '../payload-codec/index.js';
import type { AgentJobHandle } from './start.js';

/** How long one status query may wait for an answer before the loop looks again. */
const QUERY_WAIT_MS = 5_000;

/**
 * Follows a workflow until it closes, calling `onProgress` when the phase, status or poll count
 * changes, and returns its result. While it answers no query, a workflow whose payloads the
 * workers cannot open throws `PayloadUnopenedError` at once: it waits for the ring to be fixed.
 */
export async function followAgentJob(
  handle: AgentJobHandle,
  onProgress: (progress: AgentJobProgress) => void,
  options: { intervalMs?: number } = {},
): ReturnType<AgentJobHandle['result']> {
  const result = handle.result();
  let closed = false;
  const settled = result.then(
    () => (closed = true),
    () => (closed = true),
  );
  let last = '';
  let answered = false;
  while (!closed) {
    const unopened = answered ? null : await unopenedPayload(handle);
    if (unopened !== null) throw unopened;
    answered = false;
    try {
      // Bounded: the server holds a query while the workflow's first task is failing (30 s here),
      // and the loop must get back to looking whether its payloads open.
      const progress = await handle.client.withDeadline(Date.now() + QUERY_WAIT_MS, () =>
        handle.query(statusQuery),
      );
      answered = true;
      const fingerprint = `${progress.phase}|${progress.lastRecord?.status}|${progress.polls}|${progress.turns}|${progress.queue?.position}`;
      if (fingerprint !== last) {
        last = fingerprint;
        onProgress(progress);
      }
    } catch {
      // A query can fail while the workflow closes or before its first task runs; the result decides.
    }
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 500))]);
  }
  return result;
}

/** The Temporal UI page of a workflow, when the UI's base URL is known. */
export function workflowUiUrl(uiUrl: string | null, namespace: string, workflowId: string): string | null {
  if (!uiUrl) return null;
  return `${uiUrl.replace(/\/+$/, '')}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

/** One line of progress for a person following a workflow; what the API sent is escaped. */
export function progressLine(p: AgentJobProgress): string {
  if (p.phase === 'queued' && p.queue) {
    return `[queued] waiting for the project's API budget: position ${p.queue.position} of ${p.queue.queueLength}, earliest start ${p.queue.earliestStartAt}`;
  }
  const status = p.lastRecord ? `status ${terminalText(p.lastRecord.status)}` : 'no record yet';
  const next = p.nextPollAt ? `, next poll at ${p.nextPollAt}` : '';
  const error = p.lastError ? `, last error ${terminalText(p.lastError.type)}` : '';
  return `[${p.phase}] ${status}, ${p.polls} polls${next}${error}`;
}
