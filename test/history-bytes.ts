/**
 * Every byte of a workflow's history as the server stores it, for checks that a secret is in no
 * event: the protobuf encoding holds every string and bytes field raw, so a payload's data (base64
 * in the JSON form) is searched decoded.
 */
import type { WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';

/** The history of the handle's run (the latest run when it names none), protobuf-encoded. */
export async function historyBytes(handle: WorkflowHandle): Promise<Buffer> {
  const history = await handle.fetchHistory();
  return Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
}
