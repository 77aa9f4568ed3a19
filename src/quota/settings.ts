/**
 * The project quota setting as people write it (`AGENT_API_PROJECT_QUOTA=100/1h`, overrides, the
 * lease), read by src/config/worker.ts. Importable from workflow code (zod/mini is plain functions).
 */
import * as z from 'zod/mini';
import { durationMs } from '../duration.js';

/** A budget: `uses` API uses per rolling `windowMs`. */
export interface QuotaLimit {
  uses: number;
  windowMs: number;
}

/** The API's documented limit: 100 uses (creates and follow-up messages) per project per hour. */
export const DEFAULT_PROJECT_QUOTA = '100/1h';

/**
 * How long a grant waits for its take before its use returns to the budget: it must outlast one
 * create or message attempt (75 s at most) and the grant signal; 2 minutes does.
 */
export const DEFAULT_QUOTA_LEASE_MS = 2 * 60 * 1000;

/** The quota of every project: a default, overrides by project ID, and the lease. */
export interface ProjectQuotaSettings {
  /** Limit of projects without an override; null when the quota is off. */
  defaultLimit: QuotaLimit | null;
  /** Limits by project ID; null turns the quota off for that project. */
  overrides: Record<string, QuotaLimit | null>;
  /** Lease of a grant, in ms. */
  leaseMs: number;
  /** Whether the quota workflows this worker starts follow rollouts: set with TEMPORAL_WORKER_VERSIONING=on. */
  followsRollouts?: boolean;
}

/** What a quota setting must be, in its error. */
const QUOTA_FORMAT = 'must be <uses>/<window> such as 100/1h or 3/20s (a window of at least 1s), or off';

/** A quota as people write it, `<uses>/<window>` (`100/1h`, `3/20s`), as a limit, or `off` as null. */
export const quotaLimit = z.pipe(
  z.string({ error: QUOTA_FORMAT }),
  z.transform((text, ctx): QuotaLimit | null => {
    if (text.trim().toLowerCase() === 'off') return null;
    const match = /^(\d+)\s*\/\s*(.+)$/.exec(text.trim());
    const uses = Number(match?.[1]);
    const windowMs = durationMs(match?.[2] ?? '') ?? 0;
    if (uses >= 1 && windowMs >= 1_000) return { uses, windowMs };
    ctx.issues.push({ code: 'custom', message: QUOTA_FORMAT, input: text });
    return z.NEVER;
  }),
);

/** The limit of one project: its override if it has one, else the default; null when off. */
export function quotaLimitFor(settings: ProjectQuotaSettings, projectId: string): QuotaLimit | null {
  return Object.hasOwn(settings.overrides, projectId)
    ? (settings.overrides[projectId] ?? null)
    : settings.defaultLimit;
}

/** `100/1h` back from a limit, for logs, summaries and the docs' examples. */
export function formatQuotaLimit(limit: QuotaLimit | null): string {
  if (limit === null) return 'off';
  const { uses, windowMs } = limit;
  const units = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };
  const [unit, ms] = Object.entries(units).find(([, ms]) => windowMs % ms === 0) ?? ['ms', 1];
  return `${uses}/${windowMs / ms}${unit}`;
}
