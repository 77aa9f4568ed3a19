/** Raw HTTP against a simulator, without the API client: the simulator is tested on its own terms. */
import { request, type IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
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

/** What {@link rawRequest} saw: the head, every body chunk as it arrived, and whether the body was whole. */
export interface RawExchange {
  status: number;
  headers: IncomingHttpHeaders;
  /** Body chunks in arrival order, with the ms since the request was sent. */
  chunks: { bytes: Buffer; atMs: number }[];
  /** The body so far, as text. */
  text: string;
  /** True when the body reached its content-length; false when the connection ended first. */
  complete: boolean;
  /** Why the body stopped short, when it did. */
  error: Error | null;
}

/** Options of {@link rawRequest}. */
export interface RawRequestInit {
  key: string;
  body?: string;
  headers?: Record<string, string>;
  /** Called once the status and headers arrived, with a function that destroys the request. */
  onResponse?: (head: { status: number; headers: IncomingHttpHeaders }, destroy: () => void) => void;
}

/**
 * One request over node:http, reading the body chunk by chunk: what `fetch` hides (a body that
 * trickles in, or stops short of its content-length) is visible here. Resolves when the connection
 * is done with, whole or not; rejects only when no response head arrived.
 */
export function rawRequest(
  sim: RunningSimulator,
  method: string,
  path: string,
  init: RawRequestInit,
): Promise<RawExchange> {
  const started = performance.now();
  const headers: Record<string, string> = { authorization: `Bearer ${init.key}`, ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request(`${sim.url}${path}`, { method, headers, agent: false }, (res) => {
      answered = true;
      const seen: RawExchange = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        chunks: [],
        text: '',
        complete: false,
        error: null,
      };
      init.onResponse?.({ status: seen.status, headers: res.headers }, () => req.destroy());
      res.on('data', (bytes: Buffer) => seen.chunks.push({ bytes, atMs: performance.now() - started }));
      res.on('error', (err) => (seen.error = err));
      res.on('close', () => {
        seen.complete = res.complete;
        seen.text = Buffer.concat(seen.chunks.map((chunk) => chunk.bytes)).toString('utf8');
        resolve(seen);
      });
    });
    // Once the head arrived, a failure is the body's, reported on the response as `error`.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    req.end(init.body);
  });
}
