/**
 * Debian's Chromium, headless, driven through its DevTools protocol with nothing but a WebSocket
 * (undici's, already a dependency): open a page, then read its rendered text until a condition
 * holds. The UI test needs no more than that, so no browser-automation package is added.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'undici';
import { findOnPath } from '../dev/temporal-cli.js';
import { onCleanup, waitFor } from './harness.js';

/** A page open in the browser. */
export interface HeadlessPage {
  /** Resolves with the page's rendered text (`innerText`) once `holds` is true of it. */
  waitForText(holds: (text: string) => boolean, what: string, timeoutMs?: number): Promise<string>;
}

/** A running headless Chromium; stopped after the test file's tests (and by `stop`). */
export interface HeadlessChromium {
  open(url: string): Promise<HeadlessPage>;
  stop(): Promise<void>;
}

/** Starts headless Chromium on a DevTools port of its choosing, with a profile of its own. */
export async function startHeadlessChromium(): Promise<HeadlessChromium> {
  const binary = findOnPath('chromium');
  if (!binary) throw new Error('chromium is not installed (Debian: apt-get install -y chromium)');
  const profile = mkdtempSync(join(tmpdir(), 'headless-chromium-'));
  const args = ['--headless', '--disable-gpu', '--no-first-run', '--remote-debugging-port=0'];
  // Chromium refuses to run as root with its sandbox; CI containers run as root.
  if (process.getuid?.() === 0) args.push('--no-sandbox');
  const child = spawn(binary, [...args, `--user-data-dir=${profile}`, 'about:blank'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = once(child, 'exit');
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const sockets: WebSocket[] = [];
  const stop = async () => {
    for (const socket of sockets) socket.close();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(profile, { recursive: true, force: true });
  };
  onCleanup(stop);
  await waitFor(() => /DevTools listening on ws:\/\//.test(stderr) || child.exitCode !== null, {
    what: 'Chromium to open its DevTools port',
    timeoutMs: 30_000,
  });
  const port = /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(stderr)?.[1];
  if (!port) throw new Error(`Chromium did not start:\n${stderr}`);
  const devtools = `http://127.0.0.1:${port}`;

  return {
    stop,
    open: async (url) => {
      // Chromium asks for PUT here since release 111.
      const response = await fetch(`${devtools}/json/new?${url}`, { method: 'PUT' });
      const { webSocketDebuggerUrl } = (await response.json()) as { webSocketDebuggerUrl: string };
      const socket = new WebSocket(webSocketDebuggerUrl);
      sockets.push(socket);
      await once(socket, 'open');
      const evaluate = commands(socket);
      const text = async () =>
        (
          (await evaluate('Runtime.evaluate', {
            expression: 'document.body ? document.body.innerText : ""',
            returnByValue: true,
          })) as { result: { value: string } }
        ).result.value;
      return {
        waitForText: async (holds, what, timeoutMs = 60_000) => {
          let last = '';
          await waitFor(
            async () => {
              last = await text();
              return holds(last);
            },
            { what, timeoutMs, intervalMs: 250 },
          );
          return last;
        },
      };
    },
  };
}

/** Sends DevTools commands on `socket` and resolves each with its answer's `result`. */
function commands(socket: WebSocket): (method: string, params: object) => Promise<unknown> {
  let next = 0;
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as {
      id?: number;
      result?: unknown;
      error?: { message: string };
    };
    const waiting = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiting) return;
    pending.delete(message.id!);
    if (message.error) waiting.reject(new Error(message.error.message));
    else waiting.resolve(message.result);
  });
  return (method, params) =>
    new Promise((resolve, reject) => {
      const id = ++next;
      pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
}
