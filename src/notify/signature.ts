/**
 * The webhook signature (docs/notifications.md shows a receiver verifying it): HMAC-SHA256 under the
 * target's secret over `${timestamp}.${body}`, as Stripe's and Slack's, so receivers know it. The
 * signed timestamp lets a receiver refuse a replayed request; `v1=` leaves room for a second scheme.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The headers a webhook notice carries, besides `Content-Type`. */
export const NOTIFY_HEADERS = {
  signature: 'x-agent-job-signature',
  timestamp: 'x-agent-job-timestamp',
  deliveryId: 'x-agent-job-delivery',
} as const;

/** `v1=<hex HMAC-SHA256 of "<timestamp>.<body>">` under `secret`. */
export function signNotice(secret: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${timestampSeconds}.`).update(body).digest('hex');
  return `v1=${mac}`;
}

/**
 * A receiver's check: the signature matches (in constant time), and the timestamp is within
 * `toleranceSeconds` of `nowSeconds` (default 5 minutes). Why it fails, or null when it holds.
 */
export function verifyNotice(input: {
  secret: string;
  body: string;
  signature: string | undefined;
  timestamp: string | undefined;
  nowSeconds: number;
  toleranceSeconds?: number;
}): string | null {
  const { secret, body, signature, timestamp, nowSeconds } = input;
  if (signature === undefined || timestamp === undefined) return 'no signature or timestamp header';
  const seconds = Number(timestamp);
  if (!/^\d+$/.test(timestamp) || !Number.isSafeInteger(seconds)) return 'the timestamp is not Unix seconds';
  if (Math.abs(nowSeconds - seconds) > (input.toleranceSeconds ?? 300))
    return 'the timestamp is outside the tolerance';
  const expected = Buffer.from(signNotice(secret, seconds, body));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given))
    return 'the signature does not match';
  return null;
}
