/**
 * docs/failure-policy.md, generated from the failure policy (src/failure-policy/) by
 * `tsx dev/check-failure-policy.ts --write`; the check in `npm run lint` fails when the page and
 * the table differ.
 */
import { BACKOFFS, MAX_RETRY_AFTER_MS, RETRY_JITTER, type Backoff } from '../src/failure-policy/backoff.js';
import { FailureKind, KIND_TEXT } from '../src/failure-policy/kinds.js';
import {
  ANSWERS_IN_A_ROW,
  DEFAULT_BLIP_TOLERANCE_MS,
  DEFAULT_CREDENTIAL_TOLERANCE_MS,
  DEFAULT_NOTIFY_RETRY_FOR_MS,
} from '../src/failure-policy/streak.js';
import {
  handedBack,
  POLICY,
  type ApiOperation,
  type StreakBound,
  type Verdict,
} from '../src/failure-policy/table.js';

/** Kinds a notice's delivery can meet: it sends no ID or key and reads no record. */
const DELIVERY_KINDS = Object.values(FailureKind).filter(
  (kind) =>
    kind !== FailureKind.NotSendable && kind !== FailureKind.NotARecord && kind !== FailureKind.InvalidRecord,
);

/** The API calls' columns, as the page names them. */
const CALLS: Readonly<Record<ApiOperation, string>> = {
  createJob: 'create',
  getJob: 'poll',
  sendMessage: 'message',
};
const OPERATIONS = Object.keys(CALLS) as ApiOperation[];

const BOUND_TEXT: Readonly<Record<StreakBound, string>> = {
  final: 'final',
  deadline: 'retried until the deadline',
  'in-a-row': `final after ${ANSWERS_IN_A_ROW} in a row`,
  blip: 'retried for `blipTolerance`',
  credentials: 'waits for `credentialTolerance`',
};

function cell(verdict: Verdict, operation: ApiOperation): string {
  const parts = [`\`${verdict.type}\``, BOUND_TEXT[verdict.bound]];
  if (verdict.bound === 'credentials' && operation === 'createJob')
    parts[1] = 'waits only if the key worked lately';
  if (verdict.mayHaveBeenApplied && operation !== 'getJob') parts.push('**may have been applied**');
  if (verdict.readsRetryAfter) parts.push('honours `Retry-After`');
  if (verdict.bound !== 'final' && !handedBack(verdict, operation)) parts.push('retried on the server');
  return parts.join(', ');
}

const minutes = (ms: number) => `${ms / 60_000} min`;
const seconds = (ms: number) => `${ms / 1000} s`;
const backoff = (b: Backoff, unit: (ms: number) => string) =>
  `${seconds(b.initialIntervalMs)}, ×${b.backoffCoefficient} per failure, at most ${unit(b.maximumIntervalMs)}`;

/** The page. */
export function policyPage(): string {
  const rows = Object.values(FailureKind).map(
    (kind) => `| ${KIND_TEXT[kind]} | ${OPERATIONS.map((op) => cell(POLICY[kind][op], op)).join(' | ')} |`,
  );
  const deliveries = DELIVERY_KINDS.map((kind) => {
    const verdict = POLICY[kind].delivery;
    const does =
      verdict.bound === 'final'
        ? 'stops: `NoticeUndelivered`'
        : `tried again${verdict.readsRetryAfter ? ', honours `Retry-After`' : ''}`;
    return `| ${KIND_TEXT[kind].replace(/the API/g, 'the receiver').replace('`AGENT_API_BASE_URL`', "the target's URL")} | ${does} |`;
  });
  const backoffs = OPERATIONS.map((op) => `- ${CALLS[op]}: ${backoff(BACKOFFS[op], seconds)}`);
  return `<!-- Generated from src/failure-policy/ by \`tsx dev/check-failure-policy.ts --write\`. Do not edit. -->

# What a failed Agent Job API call does

One table decides it, in \`src/failure-policy/table.ts\`; this page is generated from it, and
\`npm run lint\` fails when the two differ or when another file compares an HTTP status or an API
failure type. Each cell: the failure type the caller sees, how a streak of it ends, and whether a
create or message **may have been applied** (a create that may have made an agent job, a message
that may have started a turn).

| What happened | create | poll | message |
|---|---|---|---|
${rows.join('\n')}

## How a streak ends

- **final**: at once, with the type shown; nothing is sent again.
- **retried until the deadline**: the workflow's \`timeout\` (6 h by default) ends it as
  \`AgentJobTimedOut\`, naming the last API error.
- **final after ${ANSWERS_IN_A_ROW} in a row**: an answer that will not change (the same invalid or oversized record).
- **retried for \`blipTolerance\`** (${minutes(DEFAULT_BLIP_TOLERANCE_MS)} by default): once the API has answered for the job (a
  failover's 404s, a maintenance page); for a job never answered yet, ${ANSWERS_IN_A_ROW} in a row (a wrong job ID).
- **waits for \`credentialTolerance\`** (${minutes(DEFAULT_CREDENTIAL_TOLERANCE_MS)} by default): a key that expired, was revoked,
  lost a scope or left its IP allow-list while jobs run. Every try reads the key's source again
  (\`AGENT_API_KEY_FILE\`), the \`status\` query's phase is \`waiting-for-api-key\`, the current
  details say so, the gauge \`agent_project_workflows_waiting_for_key\` counts the workflows
  waiting, and one log line names the project when a wait starts and one when it ends. A create
  waits only when this worker had another answer from the project within the tolerance; otherwise
  (a wrong key, a key of another organization) it fails \`Unauthorized\` at once, nothing created.

## Who retries, and how it backs off

"Retried on the server" means Temporal retries the activity itself (no history event per try);
every other retryable failure goes back to the workflow, which waits on its own timer, counts it
against its bound and shows it in the \`status\` query. A create or message that **may have been
applied** always goes back: the next attempt follows \`AGENT_API_AMBIGUOUS_CREATE\` (\`retry\`: sent
again, counted in \`resent\` and warned about, as the API honours no idempotency key; \`fail\`:
\`CreateOutcomeUnknown\` or \`MessageOutcomeUnknown\`, nothing sent).

Backoff of each call, before jitter (0 to +${RETRY_JITTER * 100}%), raised to the server's \`Retry-After\` (capped at ${minutes(MAX_RETRY_AFTER_MS)}):

${backoffs.join('\n')}

Polls wait between reads of an \`active\` job on their own schedule (\`poll\` in the input); the
poll backoff above spaces retries after failures. A wait that would outlast the deadline goes back
to the workflow whoever would have retried it, and so does a poll's \`Retry-After\` longer than the
longest wait between polls (the workflow waits it on its own timer, where \`pollNow\` still
applies). An attempt that timed out (start-to-close, or a heartbeat lost with its worker) may have
been sent: the workflow retries a create or message after it as ambiguous.

## A stopping worker

A create or message already sent when its worker stops is let finish (the HTTP timeouts bound it,
within \`WORKER_SHUTDOWN_GRACE\`), and its answer decides as any other. One stopped before it sent
anything is retried as surely not applied. An attempt that ends without an answer all the same
(the worker killed mid-request, the SDK's \`WorkerShutdown\` failure) goes back to the workflow as
one that may have been applied: the next attempt follows \`AGENT_API_AMBIGUOUS_CREATE\` under a new
quota use.

## A job-end notice's delivery

A workflow started with \`notify\` refuses a target name its worker does not know with
\`UnknownNotifyTarget\`, final, before any quota use or create (docs/notifications.md). When it
ends, a child workflow delivers the notice; each attempt that fails does what this table says
(the same table's delivery column), for at most \`AGENT_NOTIFY_RETRY_FOR\` (${DEFAULT_NOTIFY_RETRY_FOR_MS / 3_600_000} h by default,
kept by the server), after which the child fails with \`NoticeUndelivered\`. The agent-job workflow's own result
never waits for it. Any 2xx is delivered, whatever its body.

| What happened | delivery |
|---|---|
${deliveries.join('\n')}

Backoff between attempts: ${backoff(BACKOFFS.delivery, minutes)}, plus up to ${RETRY_JITTER * 100}% jitter, raised to the receiver's \`Retry-After\` where the table says so.
`;
}
