/**
 * The project quota setting as people write it: `AGENT_API_PROJECT_QUOTA=<uses>/<window>` (`100/1h`,
 * `3/20s`, `off`), per-project overrides, and the lease a grant lives before it comes back. Parsed
 * once by the worker's configuration loader; the activities pick the limit of each project from it.
 */
import { durationMs } from '../duration.js';
import { AgentJobError, ErrorName } from '../errors.js';

/** A budget: `uses` API uses per rolling `windowMs`. */
export interface QuotaLimit {
  uses: number;
  windowMs: number;
}

/** The API's documented limit: 100 uses (creates and follow-up messages) per project per hour. */
export const DEFAULT_PROJECT_QUOTA = '100/1h';

/**
 * How long a grant may stay unconfirmed before its use returns to the budget. It must outlast one
 * create or message attempt (75 s at most) plus the signal that confirms it; 2 minutes does.
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
  /**
   * Whether the quota workflows this worker starts follow rollouts (AUTO_UPGRADE): set when the
   * worker runs as a Worker Deployment Version (TEMPORAL_WORKER_VERSIONING=on). Absent: they don't.
   */
  followsRollouts?: boolean;
}

/** A quota setting that does not parse; `setting` names the variable, the message says what is wrong. */
export class QuotaSettingError extends AgentJobError {
  constructor(
    readonly setting: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorName.QuotaSetting, message, options);
  }
}

/**
 * Parses `<uses>/<window>` (`100/1h`, `3/20s`, `12/90m`) or `off` (null).
 *
 * @throws {QuotaSettingError} naming `setting`
 */
export function parseQuotaLimit(text: string, setting: string): QuotaLimit | null {
  const value = text.trim();
  if (value.toLowerCase() === 'off') return null;
  const match = /^(\d+)\s*\/\s*(.+)$/.exec(value);
  const uses = Number(match?.[1]);
  if (!match || !Number.isInteger(uses) || uses < 1) {
    throw new QuotaSettingError(
      setting,
      `"${text}" is not a quota: write <uses>/<window> such as 100/1h or 3/20s, or off`,
    );
  }
  const windowMs = parseDuration(match[2] as string, setting);
  if (windowMs < 1_000) throw new QuotaSettingError(setting, `the window of "${text}" must be at least 1s`);
  return { uses, windowMs };
}

/**
 * Reads the three settings: `quota` (default {@link DEFAULT_PROJECT_QUOTA}), `overrides` (a JSON
 * object from project ID to a quota or `off`), `lease` (a duration, default 2m).
 *
 * @throws {QuotaSettingError} naming the variable at fault
 */
export function parseProjectQuotaSettings(
  raw: { quota?: string; overrides?: string; lease?: string },
  names: { quota: string; overrides: string; lease: string },
): ProjectQuotaSettings {
  const defaultLimit = parseQuotaLimit(raw.quota ?? DEFAULT_PROJECT_QUOTA, names.quota);
  const overrides: Record<string, QuotaLimit | null> = {};
  if (raw.overrides !== undefined && raw.overrides.trim() !== '') {
    let json: unknown;
    try {
      json = JSON.parse(raw.overrides);
    } catch (err) {
      throw new QuotaSettingError(names.overrides, 'must be a JSON object such as {"docs-a":"10/1h"}', {
        cause: err,
      });
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) {
      throw new QuotaSettingError(names.overrides, 'must be a JSON object such as {"docs-a":"10/1h"}');
    }
    for (const [projectId, value] of Object.entries(json)) {
      if (typeof value !== 'string') {
        throw new QuotaSettingError(
          names.overrides,
          `the quota of project ${JSON.stringify(projectId)} must be a string such as "10/1h" or "off"`,
        );
      }
      overrides[projectId] = parseQuotaLimit(
        value,
        `${names.overrides} (project ${JSON.stringify(projectId)})`,
      );
    }
  }
  const leaseMs = raw.lease === undefined ? DEFAULT_QUOTA_LEASE_MS : parseDuration(raw.lease, names.lease);
  if (leaseMs < 1_000) throw new QuotaSettingError(names.lease, 'must be at least 1s');
  return { defaultLimit, overrides, leaseMs };
}

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
  for (const [unit, ms] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const) {
    if (windowMs % ms === 0) return `${uses}/${windowMs / ms}${unit}`;
  }
  return `${uses}/${windowMs}ms`;
}

function parseDuration(text: string, setting: string): number {
  const ms = durationMs(text);
  if (ms === undefined || ms <= 0) {
    throw new QuotaSettingError(setting, `"${text}" is not a duration such as 20s, 90m or 1h`);
  }
  return ms;
}
