/** The Agent Job API's record and statuses, without Temporal; src/contract.ts re-exports them. */

/**
 * Longest agent job ID accepted, in UTF-8 bytes: far above any real one (`job_` and 32 hex
 * digits), and within Temporal's 2 KiB limit on a search attribute value (`AgentJobId`).
 */
export const MAX_JOB_ID_BYTES = 1_000;

/** The statuses the API documents. */
export const AGENT_JOB_STATUSES = ['active', 'completed', 'archived', 'failed'] as const;

/** A documented agent job status. */
export type AgentJobStatus = (typeof AGENT_JOB_STATUSES)[number];

/** The statuses after which polling stops. */
export const TERMINAL_STATUSES: readonly AgentJobStatus[] = ['completed', 'archived', 'failed'];

/** Whether `status` is one the API documents as terminal. */
export function isTerminalStatus(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** The agent job record as the API returns it (./record.ts validates it); unknown fields are kept. */
export interface AgentJobRecord {
  id: string;
  status: string;
  source?: { repository?: string; ref?: string; [field: string]: unknown };
  model?: string;
  prLink: string | null;
  createdAt?: string;
  archivedAt?: string | null;
  [field: string]: unknown;
}
