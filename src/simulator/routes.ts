/**
 * What a request asks the simulator for, and the JSON replies that answer it: the route matched
 * from method and path, the prompt of a create or message body, the keys of a `PUT /_sim/keys`
 * body. Pure: no state, no socket.
 */
import type { IncomingMessage } from 'node:http';

/** Largest request body read; larger ones get 413. A prompt is text, not an upload. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** A decided answer. */
export interface Reply {
  status: number;
  body: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/** A matched route. */
export type Route =
  | { endpoint: 'create'; projectId: string }
  | { endpoint: 'get'; projectId: string; jobId: string }
  | { endpoint: 'message'; projectId: string; jobId: string }
  | { endpoint: 'admin-stats' }
  | { endpoint: 'admin-scenario'; projectId: string }
  | { endpoint: 'admin-archive'; projectId: string; jobId: string }
  | { endpoint: 'admin-keys' };

/**
 * The route of a request: a {@link Route}, 405 when the path exists under another method, or null.
 * Path segments are percent-decoded; a malformed escape is no route.
 */
export function matchRoute(method: string, path: string): Route | 405 | null {
  let parts: string[];
  try {
    parts = path.split('/').slice(1).map(decodeURIComponent);
  } catch {
    // A malformed percent escape names no resource.
    return null;
  }
  const [a, b, c, d, e, f] = parts;
  const want = (expected: string, route: Route): Route | 405 => (method === expected ? route : 405);
  if (a === 'v2' && b === 'agent' && c && d === 'job') {
    if (parts.length === 4) return want('POST', { endpoint: 'create', projectId: c });
    if (parts.length === 5 && e) return want('GET', { endpoint: 'get', projectId: c, jobId: e });
    if (parts.length === 6 && e && f === 'message')
      return want('POST', { endpoint: 'message', projectId: c, jobId: e });
  }
  if (a === '_sim') {
    if (parts.length === 2 && b === 'stats') return want('GET', { endpoint: 'admin-stats' });
    if (parts.length === 2 && b === 'keys') return want('PUT', { endpoint: 'admin-keys' });
    if (parts.length === 3 && b === 'scenarios' && c)
      return want('PUT', { endpoint: 'admin-scenario', projectId: c });
    if (parts.length === 5 && b === 'jobs' && c && d && e === 'archive') {
      return want('POST', { endpoint: 'admin-archive', projectId: c, jobId: d });
    }
  }
  return null;
}

/** The prompt of a create or message body, or the 400/413 reply that refuses it. */
export function readPrompt(req: IncomingMessage, body: string | null): string | Reply {
  if (body === null) return errorReply(413, `body larger than ${MAX_BODY_BYTES} bytes`);
  const mediaType = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (mediaType !== 'application/json') return errorReply(400, 'Content-Type must be application/json');
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    // The parser's own message would echo the body; a fixed one is enough.
    return errorReply(400, 'body is not valid JSON');
  }
  const prompt =
    typeof json === 'object' && json !== null ? (json as { prompt?: unknown }).prompt : undefined;
  if (typeof prompt !== 'string' || prompt.length === 0) {
    return errorReply(400, 'prompt is required and must be a non-empty string');
  }
  return prompt;
}

/** The keys of a `PUT /_sim/keys` body, or why it is refused (never quoting a key). */
export function parseKeys(body: string | null): string[] | string {
  let json: unknown;
  try {
    json = JSON.parse(body ?? '');
  } catch {
    return 'body is not valid JSON';
  }
  const keys =
    typeof json === 'object' && json !== null ? (json as { apiKeys?: unknown }).apiKeys : undefined;
  if (!Array.isArray(keys) || keys.length === 0) return 'apiKeys must be a non-empty array of keys';
  if (!keys.every((key): key is string => typeof key === 'string' && /^[\x21-\x7e]+$/.test(key))) {
    return 'every key must be a non-empty string of visible ASCII characters';
  }
  return keys;
}

/** The first value of a request header that may be repeated. */
export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** A reply carrying `value` as JSON. */
export function jsonReply(status: number, value: unknown): Reply {
  return { status, body: JSON.stringify(value) };
}

/** A reply carrying `{"error": error}`, with any extra headers. */
export function errorReply(status: number, error: string, headers?: Record<string, string>): Reply {
  return { status, body: JSON.stringify({ error }), headers };
}
