/** Raw HTTP against a simulator, without the API client: the simulator is tested on its own terms. */
import type { RunningSimulator } from '../../src/simulator/index.js';

/** What a request got back. */
export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body; undefined when it is not JSON. */
  json: Record<string, unknown> | undefined;
}

/** Options of {@link call}. */
export interface CallInit {
  key?: string | null;
  body?: string;
  contentType?: string | null;
  headers?: Record<string, string>;
}

/** One request; `key: null` sends no Authorization header, a body defaults to JSON content type. */
export async function call(
  sim: RunningSimulator,
  method: string,
  path: string,
  init: CallInit = {},
): Promise<RawResponse> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.key !== null && init.key !== undefined) headers.authorization = `Bearer ${init.key}`;
  if (init.body !== undefined && init.contentType !== null)
    headers['content-type'] = init.contentType ?? 'application/json';
  const response = await fetch(`${sim.url}${path}`, { method, headers, body: init.body });
  const text = await response.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Not JSON (an HTML fault, say): the text is still there for the test to look at.
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** Path of the create endpoint. */
export function jobsPath(projectId: string): string {
  return `/v2/agent/${encodeURIComponent(projectId)}/job`;
}

/** Path of one job. */
export function jobPath(projectId: string, jobId: string): string {
  return `${jobsPath(projectId)}/${encodeURIComponent(jobId)}`;
}

/** A JSON body with a prompt. */
export function promptBody(prompt: unknown): string {
  return JSON.stringify({ prompt });
}
