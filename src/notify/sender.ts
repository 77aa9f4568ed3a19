/**
 * Sends one job-end notice to one target through the worker's shared dispatcher (an egress proxy
 * applies as for the API). A target's URL is a credential, and undici's messages and causes name
 * hosts and URLs, so no undici error leaves this module: what happened is its kind and code
 * (`ECONNREFUSED`), or an HTTP status; the receiver's body is read and dropped.
 */
import { request, type Dispatcher } from 'undici';
import { getDispatcher } from '../agent-api/dispatcher.js';
import { FailureKind, isSuccess, kindOfNetworkError, kindOfStatus } from '../failure-policy/kinds.js';
import { parseRetryAfter } from '../agent-api/retry-after.js';
import { slackMessage, type JobEndNotice } from './notice.js';
import { NOTIFY_HEADERS, signNotice } from './signature.js';
import type { NotifyTarget } from './targets.js';

/** What one attempt did: delivered (a 2xx), or failed with its kind, described without the URL. */
export type SendResult =
  | { delivered: true; status: number }
  | {
      delivered: false;
      kind: FailureKind;
      /** `HTTP 503`, `connection refused (ECONNREFUSED)`: no host, no URL. */
      what: string;
      status: number | null;
      retryAfterMs: number | null;
    };

/** The bound of one attempt: a receiver answers a webhook at once, or is treated as down. */
const SEND_TIMEOUT_MS = 30_000;

/** The request for `target`: the body and the headers (signed for a webhook). */
export function noticeRequest(
  target: NotifyTarget,
  notice: JobEndNotice,
  nowMs: number,
): { body: string; headers: Record<string, string> } {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'agent-job-orchestrator',
  };
  if (target.type === 'slack') return { body: JSON.stringify(slackMessage(notice)), headers };
  const body = JSON.stringify(notice);
  const timestamp = Math.floor(nowMs / 1000);
  headers[NOTIFY_HEADERS.timestamp] = String(timestamp);
  headers[NOTIFY_HEADERS.deliveryId] = notice.deliveryId;
  headers[NOTIFY_HEADERS.signature] = signNotice(target.secret, timestamp, body);
  return { body, headers };
}

/**
 * One attempt to deliver `notice` to `target`; never throws an undici error. `nowMs` stamps the
 * signature, `signal` is the activity's cancellation, `dispatcher` a test's.
 */
export async function sendNotice(
  target: NotifyTarget,
  notice: JobEndNotice,
  options: { nowMs: number; signal?: AbortSignal; dispatcher?: Dispatcher },
): Promise<SendResult> {
  const { body, headers } = noticeRequest(target, notice, options.nowMs);
  const timeout = AbortSignal.timeout(SEND_TIMEOUT_MS);
  const signal = options.signal === undefined ? timeout : AbortSignal.any([timeout, options.signal]);
  const dispatcher = options.dispatcher ?? getDispatcher();
  let answer: Dispatcher.ResponseData;
  try {
    answer = await request(target.url, { method: 'POST', headers, body, signal, dispatcher });
  } catch (err) {
    const { kind, what } = timeout.aborted
      ? { kind: FailureKind.NoAnswerInTime, what: 'no answer in time' }
      : kindOfNetworkError(err);
    return { delivered: false, kind, what, status: null, retryAfterMs: null };
  }
  const { statusCode: status, headers: answerHeaders } = answer;
  // Dropped: a receiver's page may echo the URL. A body that breaks off changes nothing: the
  // status has decided, and undici's error would name the host.
  await answer.body.dump().catch(() => undefined);
  if (isSuccess(status)) return { delivered: true, status };
  const retryAfter = answerHeaders['retry-after'];
  return {
    delivered: false,
    kind: kindOfStatus(status),
    what: `HTTP ${status}`,
    status,
    retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, options.nowMs),
  };
}
