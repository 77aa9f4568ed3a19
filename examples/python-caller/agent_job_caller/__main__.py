"""``python -m agent_job_caller``: start an agent job from Python and, with ``--wait``, print its prLink.

The Temporal connection comes from the standard TEMPORAL_* settings, the task queue from
TEMPORAL_TASK_QUEUE (``agent-jobs`` by default) and the payload codec's ring from
TEMPORAL_PAYLOAD_KEYS_FILE, as for the worker and the starter. Exit codes: 0 started (or, with
``--wait``, completed), 1 the workflow failed (the failure type is printed), 2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import traceback
import unicodedata
from typing import Any

from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from .caller import DEFAULT_TASK_QUEUE, AgentJobInput, connect, result, start_agent_job


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m agent_job_caller", description="Start an agent-job workflow."
    )
    parser.add_argument("--project", required=True, help="the documentation project")
    parser.add_argument("--prompt", required=True, help="the instruction for the agent")
    parser.add_argument("--key", help="idempotency key: the same key reaches the same workflow")
    parser.add_argument(
        "--task-queue",
        default=os.environ.get("TEMPORAL_TASK_QUEUE") or DEFAULT_TASK_QUEUE,
        help="the workers' task queue (TEMPORAL_TASK_QUEUE, default agent-jobs)",
    )
    parser.add_argument("--priority", choices=["interactive", "batch"], default="interactive")
    parser.add_argument("--poll-interval", help="first wait between polls, e.g. 5s (the workflow's default)")
    parser.add_argument("--wait", action="store_true", help="wait for the job's end and print its prLink")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


async def _run(args: argparse.Namespace) -> int:
    client = await connect()
    job: AgentJobInput = {"projectId": args.project, "prompt": args.prompt}
    if args.poll_interval is not None:
        job["poll"] = {"initialInterval": args.poll_interval, "maxInterval": args.poll_interval}
    try:
        handle = await start_agent_job(
            client, job, key=args.key, task_queue=args.task_queue, priority=args.priority
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not args.wait:
        _print(args.json, {"workflowId": handle.id}, f"started {handle.id}")
        return 0
    try:
        done = await result(handle)
    except WorkflowFailureError as err:
        cause = err.cause
        failure_type = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
        error = {"type": failure_type, "message": str(cause)}
        _print(args.json, {"workflowId": handle.id, "error": error}, f"failed: {failure_type}: {cause}")
        return 1
    summary = {"workflowId": handle.id, "status": done["status"], "prLink": done["prLink"]}
    _print(args.json, summary, f"{done['status']}: prLink {done['prLink']}")
    return 0


def _print(as_json: bool, value: dict[str, Any], text: str) -> None:
    print(json.dumps(value) if as_json else _terminal(text))


def _terminal(text: str) -> str:
    """``text`` safe on a terminal, as the starter's ``terminalText``: control and format characters
    (ESC, CR, bidi overrides, ...) of an API's message or link written as visible ``\\u{..}``."""
    unsafe = {"Cc", "Cf", "Zl", "Zp", "Cs"}
    return "".join(f"\\u{{{ord(c):x}}}" if unicodedata.category(c) in unsafe else c for c in text)


def main() -> None:
    """Runs the command line; exits with its code."""
    args = _arguments(sys.argv[1:])
    try:
        code = asyncio.run(_run(args))
    except Exception:
        traceback.print_exc()
        code = 1
    # The SDK's Rust bridge keeps threads that can take the GIL while the interpreter finalizes, and
    # a short-lived client process then aborts with "PyGILState_Release: thread state ... must be
    # current" (SIGABRT) after its work is done (temporalio/sdk-python#300, open; seen here in one
    # run of the e2e test). Everything is printed and flushed by now: exit without the teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
