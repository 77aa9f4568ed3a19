/**
 * The job summary the action writes (GITHUB_STEP_SUMMARY, GitHub-flavoured markdown). Every value,
 * the API's and the caller's, goes through ../escape.ts: it renders as text, never as markdown.
 */
import * as core from '@actions/core';
import { markdownText, markdownUrl } from '../escape.js';

/** How far the action got. */
export type SummaryOutcome =
  | { kind: 'started' }
  | { kind: 'ended'; status: string; jobId: string; prLink: string | null }
  | { kind: 'failed'; status: string; type: string; message: string; jobId: string | null };

/** What the summary shows. */
export interface SummaryFacts {
  project: string;
  workflowId: string;
  workflowUrl: string | null;
  /** A warning for the person reading (an attach to a job given another prompt), or null. */
  warning?: string | null;
  outcome: SummaryOutcome;
}

/** One row of a two-column table, the value already markdown. */
function row(name: string, value: string): string {
  return `| ${name} | ${value} |`;
}

/** The job summary's markdown, ending in a blank line so a later step's summary starts apart. */
export function jobSummary(facts: SummaryFacts): string {
  const { outcome } = facts;
  const rows = [
    row('Project', markdownText(facts.project)),
    row('Workflow', markdownText(facts.workflowId)),
    row(
      'Temporal UI',
      facts.workflowUrl === null ? 'no temporal-ui-url given' : markdownUrl(facts.workflowUrl),
    ),
  ];
  if (outcome.kind === 'started') {
    rows.push(row('Status', 'started; not waited for (wait: false)'));
  } else {
    const jobId = outcome.jobId === null ? 'not created' : markdownText(outcome.jobId);
    rows.push(row('Agent job', jobId), row('Status', markdownText(outcome.status)));
  }
  if (outcome.kind === 'ended') {
    const pr = outcome.prLink === null ? 'none: the agent changed no files' : markdownUrl(outcome.prLink);
    rows.push(row('Pull request', pr));
  }
  if (outcome.kind === 'failed') {
    rows.push(row('Failure', `${markdownText(outcome.type)}: ${markdownText(outcome.message)}`));
  }
  if (facts.warning) rows.push(row('Warning', markdownText(facts.warning)));
  return ['### Agent job', '', '| | |', '| --- | --- |', ...rows, '', ''].join('\n');
}

/** Appends the job summary of `facts`; outside a runner (no GITHUB_STEP_SUMMARY) there is none. */
export async function writeJobSummary(facts: SummaryFacts): Promise<void> {
  if (process.env.GITHUB_STEP_SUMMARY) await core.summary.addRaw(jobSummary(facts)).write();
}
