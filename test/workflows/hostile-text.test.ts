/**
 * What the API sends never reaches a person raw: a completed record whose `prLink` carries a
 * markdown link or a terminal's escape sequence is not a record, so it never becomes a result, and
 * neither the failure nor the workflow's current details (markdown in the Temporal UI) hold it.
 * Real server, real worker, the real simulator over HTTP answering every read with such a record.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FailureType, statusQuery } from '../../src/contract.js';
import { startSimulatedSuite, workflowFailure } from '../harness.js';

const suite = await startSimulatedSuite('hostile-text');
const { project } = suite;

/**
 * A failure's message with its JSON string literals taken out: what it says outside quotes. The
 * workflow and the API client quote what came from the API (an ID, an excerpt of the body), so
 * that is where API text may stand, escaped.
 */
const unquoted = (message: string) => message.replace(/"(?:[^"\\]|\\.)*"/g, '""');

/** The workflow's current details, as the Temporal UI reads them. */
async function currentDetails(handle: Awaited<ReturnType<typeof suite.startJob>>): Promise<string> {
  const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
  return metadata.currentDetails ?? '';
}

describe('a hostile prLink', { concurrency: 2 }, () => {
  for (const [name, prLink] of [
    ['a markdown link', 'https://x.example/pr/1 [Approve](https://evil.example)'],
    [
      'an OSC 8 terminal hyperlink',
      'https://x.example/pr/1\u001b]8;;https://evil.example\u001b\\Approve\u001b]8;;\u001b\\',
    ],
  ] as const) {
    test(
      `a completed record whose prLink carries ${name} never reaches a result`,
      { timeout: 120_000 },
      async () => {
        const projectId = project({
          faults: { rules: [{ endpoint: 'get', kind: 'altered', set: { status: 'completed', prLink } }] },
        });
        const handle = await suite.startJob({
          projectId,
          prompt: 'Document the API',
          poll: { initialInterval: '200ms', maxInterval: '200ms' },
          blipTolerance: '3s',
        });
        // How often an invalid record is read again before the workflow gives up is the failure
        // policy's; what matters here is that it never completes with the link.
        const failure = await workflowFailure(handle);
        assert.equal(failure.type, FailureType.UnexpectedResponse, failure.message);
        const progress = await handle.query(statusQuery);
        assert.ok(progress.jobId !== null, 'the create was answered');
        assert.ok(failure.message.includes(progress.jobId), `the message names the job: ${failure.message}`);
        assert.doesNotMatch(failure.message, /\p{Cc}/u, 'no ESC or other control character');
        assert.doesNotMatch(unquoted(failure.message), /evil\.example|\[Approve\]/, failure.message);
        assert.equal(progress.lastRecord?.prLink ?? null, null, 'the link was never kept');
        assert.doesNotMatch(await currentDetails(handle), /evil\.example|\p{Cc}/u);
      },
    );
  }
});
