# syntax=docker/dockerfile:1
#
# Images of the agent-job worker (the default, last target) and of the Agent Job API simulator
# (`--target simulator`). Both run the same compiled `lib/` with production dependencies only.
#
#   docker build -t agent-job-worker .
#   docker build --target simulator -t agent-job-simulator .
#
# The worker's image also runs the codec server (docs/payload-codec.md), with another command:
# `node lib/codec-server.js` (deploy/k8s/codec-server.yaml, deploy/compose/codec.yaml).
#
# Debian slim, not Alpine: @temporalio/core-bridge ships its native Rust library prebuilt for
# glibc Linux only, so on musl the worker fails to load it. Node 24 is the active LTS line; the
# tag is pinned to a patch release so a rebuild gives the same runtime (bump it on purpose).
ARG NODE_IMAGE=node:24.21.0-slim

# Build: every dependency, compile the TypeScript, and prebuild the workflow bundle so the worker
# does not run webpack at each start. The build also writes the bundle's build ID to lib/build-id:
# the image's Worker Deployment Version (docs/versioning.md), the same ID for the same workflow code.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY dev/bundle-workflows.ts ./dev/
COPY src ./src
RUN npm run build

# Runtime base: production dependencies and the build output, owned by root, so the process
# (the official image's unprivileged `node` user, uid 1000) can read its code but not change it.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --no-audit --no-fund
COPY --from=build /app/lib ./lib
# Numeric, so Kubernetes can verify `runAsNonRoot` without resolving a user name.
USER 1000:1000
# Docker's default stop signal, stated because the graceful drain depends on it reaching node.
STOPSIGNAL SIGTERM

# The Agent Job API simulator, for local stacks and demos. Any HTTP answer (even 401 or 404)
# shows that it is listening; its routes are not the point of the check.
FROM runtime AS simulator
ENV SIMULATOR_HOST=0.0.0.0 \
    SIMULATOR_PORT=8787
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8787/').then(() => process.exit(0), () => process.exit(1))"]
CMD ["node", "lib/simulator/main.js"]

# The worker (default target). Exec-form CMD makes node PID 1, so SIGTERM reaches it directly
# (not through npm or a shell) and the SDK drains in-flight tasks before it exits 0.
FROM runtime AS worker
# 8080: /healthz and /readyz (HEALTH_ADDRESS); 9464: Prometheus /metrics (METRICS_ADDRESS). The
# worker binds both to 127.0.0.1 unless those settings say otherwise: the HEALTHCHECK below runs in
# the container and needs no more; probes and scrapers from outside it need 0.0.0.0, which
# deploy/k8s and docker-compose.yml set.
EXPOSE 8080 9464
# Readiness, not liveness: a worker that is draining or has lost its poller is not healthy.
# Slim images have no curl; node's own fetch does the request.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "lib/worker.js"]
