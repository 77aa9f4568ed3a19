/**
 * The one place that names the Temporal releases this repository runs. The builds
 * (dev/temporal-builds.ts, dev/temporal-cli.ts), the dev server, the cluster, the docs and the tests
 * read them from here; docker-compose.yml cannot import a module, so test/deploy checks that its
 * image tags are these. No Node modules are imported, so any script can read it. (The Node release
 * is the `node` devDependency of package.json, which test/deploy checks against the Dockerfile's.)
 */

/**
 * The Temporal CLI, used as a client only: the `temporal` commands the docs give and the tests run
 * (`workflow execute`, `workflow reset`), the compose init script and the rollout steps. No server
 * of the tests runs from it (the demo's test runs the demo on its dev server, as on a user's CLI). It stays 1.5.1: CLI 1.9.1's go.mod replaces its own `github.com/temporalio/cli/cliext`
 * module with a directory that the module proxy's zip leaves out, and the proxy serves no version of
 * that module, so `go install ...@v1.9.1` stops with "contains one or more replace directives" and
 * no build of it can be had from the proxy (1.6 to 1.9.0 have the same replace).
 */
export const TEMPORAL_CLI_VERSION = '1.5.1';

/**
 * The Temporal Server release of the compose images (`temporalio/server`, `temporalio/admin-tools`),
 * built from source once per machine: the dev server of the tests, the demo and the benchmark runs
 * it on in-memory SQLite, and `npm run test:cluster` on PostgreSQL.
 */
export const TEMPORAL_SERVER_VERSION = '1.32.2';

/**
 * The Temporal UI release of the compose stack's `temporalio/ui` image (the UI that CLI 1.9.1, the
 * CLI release paired with Server 1.32, embeds), and of the UI server the demo builds from source
 * (`github.com/temporalio/ui-server/v2`, which the module proxy serves at this release).
 */
export const TEMPORAL_UI_VERSION = '2.54.1';

/**
 * The Go toolchain the server, UI server and CLI builds run with. Server 1.32.2's go.mod asks for Go 1.26.10,
 * newer than the machine's 1.26.8; with `GOTOOLCHAIN` set, the go command takes this toolchain from
 * the Go module proxy like any module (about 76 MB, once per machine) and builds with it. A machine
 * whose own Go is newer runs this one all the same, so every machine builds the same way.
 */
export const GO_TOOLCHAIN = 'go1.27.3';

/** The environment for a `go install` of these releases: the toolchain above, no VCS stamping. */
export function goBuildEnv(env: NodeJS.ProcessEnv, gobin: string): NodeJS.ProcessEnv {
  return {
    ...env,
    GOBIN: gobin,
    GOTOOLCHAIN: GO_TOOLCHAIN,
    GOFLAGS: `${env.GOFLAGS ?? ''} -buildvcs=false`.trim(),
  };
}
