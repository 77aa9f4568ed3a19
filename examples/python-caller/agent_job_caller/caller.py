"""Starting agent-job workflows from Python, and reading their results, through temporalio's Client.

The workflow is the TypeScript worker's ``agentJobWorkflow`` (src/contract.ts); this module names
it, its task queue and its input fields, and starts it the way the TypeScript library's
``startAgentJob`` does (src/client/start.ts): the workflow ID from the project and the caller's key,
attach to a running workflow of that key (USE_EXISTING), the result of a completed one returned
(ALLOW_DUPLICATE_FAILED_ONLY), the project as a search attribute and as the fairness key.

The client must carry the same payload codec as the worker when the worker has one:
``connect()`` gives it the ring TEMPORAL_PAYLOAD_KEYS_FILE names.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict, cast

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import (
    Priority,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.envconfig import ClientConfig
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from .codec import KEYS_FILE_SETTING, payload_data_converter
from .ids import agent_job_summary, agent_job_workflow_id, checked_key, fairness_key

WORKFLOW_TYPE = "agentJobWorkflow"
"""The workflow type the TypeScript worker registers."""

DEFAULT_TASK_QUEUE = "agent-jobs"
"""The task queue the worker listens on unless TEMPORAL_TASK_QUEUE says otherwise."""

START_PRIORITIES: Mapping[str, int] = {"interactive": 2, "batch": 4}
"""Task-queue priority keys of a start: interactive jobs' tasks go first on busy workers."""

PROJECT_ID_ATTRIBUTE = SearchAttributeKey.for_keyword("AgentProjectId")
JOB_ID_ATTRIBUTE = SearchAttributeKey.for_keyword("AgentJobId")

# Closed statuses after which the reuse policy lets a new run start under the same workflow ID.
_RESTARTABLE = frozenset(
    {
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.TIMED_OUT,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TERMINATED,
    }
)


class PollSettings(TypedDict, total=False):
    """How often the workflow polls (durations as ``"10s"`` or milliseconds)."""

    initialInterval: str | int
    maxInterval: str | int
    backoffCoefficient: float


class AgentJobInput(TypedDict):
    """The workflow's input: one JSON object. The workflow checks it and fails with
    ``InvalidInput`` naming the field."""

    projectId: str
    prompt: NotRequired[str]
    jobId: NotRequired[str]
    poll: NotRequired[PollSettings]
    timeout: NotRequired[str | int]
    previousCreate: NotRequired[str]


class AgentJobResult(TypedDict):
    """The workflow's result on ``completed`` or ``archived``."""

    job: dict[str, Any]
    prLink: str | None
    status: str
    polls: int
    turns: int
    created: bool
    resent: int


async def connect(env: Mapping[str, str] | None = None) -> Client:
    """A client as the worker's and the starter's: the connection from the standard TEMPORAL_*
    settings (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS, profiles), the payload
    codec from TEMPORAL_PAYLOAD_KEYS_FILE (off when unset)."""
    environ = dict(os.environ if env is None else env)
    config = ClientConfig.load_client_connect_config(override_env_vars=environ)
    keys_file = environ.get(KEYS_FILE_SETTING) or None
    config.setdefault("target_host", "localhost:7233")
    return await Client.connect(**config, data_converter=payload_data_converter(keys_file))


async def start_agent_job(
    client: Client,
    job: AgentJobInput,
    *,
    key: str | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
    priority: Literal["interactive", "batch"] = "interactive",
) -> WorkflowHandle[Any, AgentJobResult]:
    """Starts the agent-job workflow for ``job``, or attaches to the one already started with the
    same project and ``key``.

    Running: attached. Completed: its handle, whose result is the agent job's. Failed, timed out,
    cancelled or terminated: a new run under the same ID; when the run before recorded its agent job
    (the ``AgentJobId`` search attribute), the new run goes on with that job instead of creating
    another (the API honours no idempotency key). When it recorded none, the new run's create
    follows the worker's AGENT_API_AMBIGUOUS_CREATE, as after a create whose answer was lost: this
    caller does not read the run's history to tell a create that surely failed (the TypeScript
    library does).

    Raises:
        ValueError: a blank key, a key with a lone surrogate, or an unknown priority.
    """
    if priority not in START_PRIORITIES:
        raise ValueError(f"priority: must be one of {', '.join(START_PRIORITIES)}")
    project_id = job["projectId"]
    workflow_id = agent_job_workflow_id(project_id, str(uuid.uuid4()) if key is None else checked_key(key))
    args = job if key is None else await _restart_input(client, workflow_id, job)
    summary_text = job.get("prompt") or f"watch {job.get('jobId', '')}"
    try:
        return await client.start_workflow(
            WORKFLOW_TYPE,
            args,
            id=workflow_id,
            task_queue=task_queue,
            result_type=dict,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            static_summary=agent_job_summary(project_id, summary_text),
            search_attributes=TypedSearchAttributes([SearchAttributePair(PROJECT_ID_ATTRIBUTE, project_id)]),
            priority=Priority(priority_key=START_PRIORITIES[priority], fairness_key=fairness_key(project_id)),
        )
    except WorkflowAlreadyStartedError:
        # Completed under this key: the reuse policy refused a new run; its result is the job's.
        return client.get_workflow_handle(workflow_id, result_type=dict)


async def _restart_input(client: Client, workflow_id: str, job: AgentJobInput) -> AgentJobInput:
    """The input of a start under a key that a run may have used and ended (see start_agent_job)."""
    try:
        run = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return job
        raise
    if run.status not in _RESTARTABLE:
        return job
    job_id = run.typed_search_attributes.get(JOB_ID_ATTRIBUTE)
    if job_id is not None:
        # The prompt went out with the create of the run before: the new run watches that job.
        rest = {k: v for k, v in job.items() if k != "prompt"}
        return cast(AgentJobInput, {**rest, "jobId": job_id})
    status = run.status.name.lower() if run.status else "ended"
    return {**job, "previousCreate": f"the run before under this key ({status}, history not read)"}


async def result(handle: WorkflowHandle[Any, AgentJobResult]) -> AgentJobResult:
    """Waits for the workflow's end: its result, decoded, with ``prLink``.

    Raises:
        temporalio.client.WorkflowFailureError: the workflow failed; its ``cause`` is the
            ``ApplicationError`` whose ``type`` is one of the contract's failure types.
    """
    return await handle.result()
