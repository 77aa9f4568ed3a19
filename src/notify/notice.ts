/**
 * The job-end notice a target receives when an agent-job workflow ends, as the webhook's JSON body
 * and as a Slack message. docs/notifications.md describes every field; a field is added, never
 * renamed or removed (receivers parse it). No Node modules: the workflow builds the notice.
 */
import type { AgentJobProgress, AgentJobRecord } from '../contract.js';
import { slackLink, slackText } from '../escape.js';

/** How the workflow ended: the `status` query's end phases. */
export type NoticeOutcome = Extract<
  AgentJobProgress['phase'],
  'completed' | 'archived' | 'failed' | 'timed-out' | 'cancelled'
>;

/** The webhook body (`Content-Type: application/json`); docs/notifications.md, "The webhook request", says what each field holds. */
export interface JobEndNotice {
  type: 'agent-job.ended';
  deliveryId: string;
  workflowId: string;
  projectId: string;
  outcome: NoticeOutcome;
  jobId: string | null;
  prLink: string | null;
  job: AgentJobRecord | null;
  failure: { type: string; message: string } | null;
  polls: number;
  turns: number;
  created: boolean;
  resent: number;
  endedAt: string;
}

const HEADLINE: Readonly<Record<NoticeOutcome, string>> = {
  completed: 'Agent job completed',
  archived: 'Agent job archived',
  failed: 'Agent job failed',
  'timed-out': 'Agent job timed out',
  cancelled: 'Agent job workflow cancelled',
};

/** A Slack `plain_text` object: Slack renders it as it is, with no formatting, link or mention. */
function plain(text: string) {
  return { type: 'plain_text', text, emoji: false } as const;
}

/**
 * The Slack incoming-webhook message of `notice`: `text` (what notifications and clients without
 * blocks show) in mrkdwn with every value escaped ({@link slackText}), and blocks whose values are
 * `plain_text`, shown exactly; the pull request is a link when its URL is a clean one.
 */
export function slackMessage(notice: JobEndNotice): object {
  const headline = HEADLINE[notice.outcome];
  const pr = notice.prLink === null ? null : slackLink(notice.prLink, 'Pull request');
  const text =
    `${headline} in project ${slackText(notice.projectId)}` +
    (notice.jobId === null ? '' : `, job ${slackText(notice.jobId)}`) +
    (pr === null ? '' : `: ${pr}`);
  const fields = [
    plain(`Project: ${notice.projectId}`),
    plain(`Job: ${notice.jobId ?? '(not created)'}`),
    plain(`Workflow: ${notice.workflowId}`),
    plain(`Polls: ${notice.polls}, turns: ${notice.turns}`),
  ];
  const blocks: object[] = [{ type: 'section', text: { type: 'mrkdwn', text: `*${headline}*` }, fields }];
  if (pr !== null) blocks.push({ type: 'section', text: { type: 'mrkdwn', text: pr } });
  if (notice.failure !== null) {
    blocks.push({
      type: 'context',
      elements: [plain(`${notice.failure.type}: ${notice.failure.message}`.slice(0, 2_000))],
    });
  }
  return { text, blocks };
}
