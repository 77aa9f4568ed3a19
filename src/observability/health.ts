/**
 * The health endpoint for Kubernetes probes and the Docker HEALTHCHECK: `GET /healthz` (the process
 * answers) and `GET /readyz` (the worker is polling; false once shutdown starts, so a draining pod
 * gets no new traffic).
 */
import { createServer } from 'node:http';
import { listen } from '../payload-codec/codec-server.js';

/** Starts the health server, `status()` read on every request; throws naming HEALTH_ADDRESS when it cannot bind. */
export async function startHealthServer(
  address: { host: string; port: number },
  status: () => { ready: boolean; state: string },
) {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const { ready, state } = status();
    const reply = (code: number, body: object) =>
      res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method !== 'GET' && req.method !== 'HEAD') res.writeHead(405, { allow: 'GET, HEAD' }).end();
    else if (path === '/healthz' || path === '/livez') reply(200, { ok: true, state });
    else if (path === '/readyz') reply(ready ? 200 : 503, { ready, state });
    else reply(404, { error: 'try /healthz or /readyz' });
  });
  const inUse = ' (another process holds the port; set HEALTH_ADDRESS to a free one)';
  return listen(server, address, '/healthz and /readyz on HEALTH_ADDRESS', inUse);
}
