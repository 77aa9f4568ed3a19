/**
 * Writing replies onto the socket: after the scenario's latency, and as the request's fault changes
 * them. A fault either replaces the handler (another status, an HTML page, a hang, a drop) or goes
 * onto the real reply (a delay, padding, changed fields, a trickle, a cut, a reset after the store
 * acted). Which fault a request meets is decided in `faults.ts`; this module only carries it out.
 */
import { STATUS_CODES, type ServerResponse } from 'node:http';
import { errorReply, type Reply } from './routes.js';
import type { Endpoint, FaultRule } from './scenario.js';

/** What a request turned out to be, for the log line and the stats. */
export interface Exchange {
  endpoint: Endpoint | 'admin' | 'unknown';
  projectId: string | null;
  outcome: string | null;
  fault: FaultRule['kind'] | null;
}

/**
 * Writes replies and carries out faults. It owns the pending latency timers and trickle intervals,
 * so {@link cancelPending} can end them all at stop(); it reports every API outcome (a status, or
 * `hang`, `drop`, `reset`) to the counter it is given, so the counts stay in the server's stats.
 */
export class ReplyWriter {
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #countOutcome: (outcome: string) => void;

  /** @param countOutcome counts an API request's outcome (admin requests are not counted) */
  constructor(countOutcome: (outcome: string) => void) {
    this.#countOutcome = countOutcome;
  }

  /** Clears every pending latency timer and trickle interval. */
  cancelPending(): void {
    // Latency timers and trickle intervals alike: clearTimeout clears both kinds.
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  /**
   * Carries out the faults that replace the handler: writes their reply after `latencyMs`, or
   * hangs or drops the socket. Returns true when the request is dealt with, false when the handler
   * is to run (no such fault; a `reset-after-store` is counted here, before the store acts).
   */
  preempt(res: ServerResponse, exchange: Exchange, fault: FaultRule, latencyMs: number): boolean {
    const early = this.#faultBeforeHandling(fault, res, exchange);
    if (early === 'done') return true;
    if (early === null) return false;
    this.send(res, exchange, latencyMs, early);
    return true;
  }

  /**
   * Writes the handler's `reply` with what `fault` does to it: a reset after the store acted, a
   * longer delay, and on success a padded or changed body, a trickle or a cut mid-body; a truncated
   * body, with 200, whatever the status.
   */
  deliver(
    res: ServerResponse,
    exchange: Exchange,
    latencyMs: number,
    reply: Reply,
    fault: FaultRule | null,
  ): void {
    if (fault?.kind === 'reset-after-store') {
      exchange.outcome = 'reset';
      this.#after(fault.afterMs ?? 0, () => res.socket?.resetAndDestroy());
      return;
    }
    if (fault?.kind === 'slow') {
      this.send(res, exchange, latencyMs + fault.ms, reply);
      return;
    }
    if (fault?.kind === 'oversized' && reply.status < 300) {
      this.send(res, exchange, latencyMs, { ...reply, body: pad(reply.body, fault.bytes) });
      return;
    }
    if (fault?.kind === 'altered' && reply.status < 300) {
      this.send(res, exchange, latencyMs, { ...reply, body: alter(reply.body, fault) });
      return;
    }
    if (fault?.kind === 'trickle' && reply.status < 300) {
      this.#after(latencyMs, () => this.#trickle(res, exchange, reply, fault));
      return;
    }
    if (fault?.kind === 'reset-mid-body' && reply.status < 300) {
      this.#after(latencyMs, () => this.#resetMidBody(res, exchange, reply, fault.bytes));
      return;
    }
    if (fault?.kind === 'truncated') {
      this.send(res, exchange, latencyMs, { ...reply, status: 200, body: truncate(reply.body) });
      return;
    }
    this.send(res, exchange, latencyMs, reply);
  }

  /** Writes `reply` after the scenario's latency. */
  send(res: ServerResponse, exchange: Exchange, latencyMs: number, reply: Reply): void {
    this.#after(latencyMs, () => {
      if (res.destroyed) return;
      res.end(this.#writeHead(res, exchange, reply, String(reply.status)));
    });
  }

  /** Faults that replace the handler: a reply, or 'done' when the socket was dealt with. */
  #faultBeforeHandling(fault: FaultRule, res: ServerResponse, exchange: Exchange): Reply | 'done' | null {
    switch (fault.kind) {
      case 'status':
        return errorReply(
          fault.status,
          fault.message ?? STATUS_CODES[fault.status] ?? 'error',
          retryAfter(fault),
        );
      case 'hang':
        // Nothing is written; stop() or the client's own timeout ends it.
        exchange.outcome = 'hang';
        this.#countOutcome('hang');
        return 'done';
      case 'drop':
        exchange.outcome = 'drop';
        this.#countOutcome('drop');
        res.socket?.destroy();
        return 'done';
      case 'html':
        return {
          status: fault.status,
          contentType: 'text/html; charset=utf-8',
          body: htmlPage(fault.status),
        };
      case 'truncated':
        return fault.status === 502
          ? { status: 502, body: truncate(JSON.stringify({ error: 'bad gateway' })) }
          : null;
      case 'reset-after-store':
        this.#countOutcome('reset');
        return null;
      case 'altered':
      case 'oversized':
      case 'slow':
      case 'trickle':
      case 'reset-mid-body':
        // Handled as usual; the change, the padding, the delay or the cut goes onto the real reply.
        return null;
    }
  }

  /** Runs `fn` after `ms`, at once for 0; {@link cancelPending} (at stop()) clears what is pending. */
  #after(ms: number, fn: () => void): void {
    if (ms <= 0) {
      fn();
      return;
    }
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
  }

  /** Writes the status and headers of `reply`, counting it under `outcome`; returns the body to write. */
  #writeHead(res: ServerResponse, exchange: Exchange, reply: Reply, outcome: string): Buffer {
    exchange.outcome = outcome;
    if (exchange.endpoint !== 'admin') this.#countOutcome(outcome);
    const body = Buffer.from(reply.body, 'utf8');
    res.writeHead(reply.status, {
      'content-type': reply.contentType ?? 'application/json',
      'content-length': body.length,
      ...reply.headers,
    });
    return body;
  }

  /**
   * Writes `reply` a few bytes at a time: the headers and the first chunk now, then a chunk every
   * `intervalMs`. The interval ends with the body, when the socket closes, or at stop().
   */
  #trickle(
    res: ServerResponse,
    exchange: Exchange,
    reply: Reply,
    fault: FaultRule & { kind: 'trickle' },
  ): void {
    if (res.destroyed) return;
    const body = this.#writeHead(res, exchange, reply, String(reply.status));
    const step = fault.bytesPerChunk ?? 1;
    let sent = 0;
    const writeChunk = () => {
      const chunk = body.subarray(sent, sent + step);
      sent += chunk.length;
      if (sent < body.length) res.write(chunk);
      else res.end(chunk);
    };
    writeChunk();
    if (sent >= body.length) return;
    const interval = setInterval(() => {
      writeChunk();
      if (sent < body.length) return;
      clearInterval(interval);
      this.#timers.delete(interval);
    }, fault.intervalMs ?? 2000);
    this.#timers.add(interval);
    res.once('close', () => {
      clearInterval(interval);
      this.#timers.delete(interval);
    });
  }

  /**
   * Writes the headers of `reply` with its full length and the first `bytes` bytes of its body (by
   * default through the `"id":"..."` pair), then closes the socket. A plain close (FIN), not a TCP
   * reset: a reset may discard what the client had received but not yet read.
   */
  #resetMidBody(res: ServerResponse, exchange: Exchange, reply: Reply, bytes: number | undefined): void {
    if (res.destroyed) return;
    const body = this.#writeHead(res, exchange, reply, 'reset');
    const cut = Math.min(bytes ?? throughIdPair(body), body.length - 1);
    res.flushHeaders();
    if (cut > 0) res.write(body.subarray(0, cut));
    // end() flushes what is queued, then closes our side; the client sees the body stop short.
    res.socket?.end();
  }
}

/** The fault's Retry-After header, in the form it asks for. */
function retryAfter(fault: FaultRule & { kind: 'status' }): Record<string, string> | undefined {
  if (fault.retryAfter === undefined) return undefined;
  const { seconds, form } = fault.retryAfter;
  if (form === 'http-date') return { 'retry-after': new Date(Date.now() + seconds * 1000).toUTCString() };
  return { 'retry-after': String(seconds) };
}

/** A JSON record with an unknown field `padding` of `bytes` characters added. */
function pad(body: string, bytes: number): string {
  const record = JSON.parse(body) as Record<string, unknown>;
  return JSON.stringify({ ...record, padding: 'x'.repeat(bytes) });
}

/** A JSON record with the fields of `set` replaced and those of `remove` left out. */
function alter(body: string, fault: FaultRule & { kind: 'altered' }): string {
  const record = { ...(JSON.parse(body) as Record<string, unknown>), ...fault.set };
  for (const field of fault.remove ?? []) delete record[field];
  return JSON.stringify(record);
}

/** The length of a JSON record's text up to and including its `"id":"..."` pair; half of it without one. */
function throughIdPair(body: Buffer): number {
  const text = body.toString('utf8');
  const match = /"id"\s*:\s*"(?:[^"\\]|\\.)*"/.exec(text);
  if (match === null) return Math.floor(body.length / 2);
  return Buffer.byteLength(text.slice(0, match.index + match[0].length), 'utf8');
}

/** The HTML page of an `html` fault: a maintenance page with 200, a proxy's error page with 502. */
function htmlPage(status: 200 | 502): string {
  if (status === 200) {
    return (
      // The title stays "200 OK" (a status page's generic one): clients' error excerpts start with it.
      '<html><head><title>200 OK</title></head><body><h1>Down for maintenance</h1>' +
      '<p>We&rsquo;ll be back soon. The service is down for scheduled maintenance; ' +
      'please try again in a few minutes.</p></body></html>'
    );
  }
  return `<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1><p>upstream said no</p></body></html>`;
}

/** The first half of a JSON text: what a client sees when a proxy cuts a response short. */
function truncate(body: string): string {
  return body.slice(0, Math.max(1, Math.floor(body.length / 2)));
}
