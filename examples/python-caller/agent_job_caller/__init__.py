"""A Python caller of agent-job-orchestrator: start agent jobs and read their results through
temporalio's Client, with the same payload codec as the TypeScript worker (see README.md)."""

from .caller import (
    DEFAULT_TASK_QUEUE,
    WORKFLOW_TYPE,
    AgentJobInput,
    AgentJobResult,
    connect,
    result,
    start_agent_job,
)
from .codec import (
    AesGcmPayloadCodec,
    FileKeyRing,
    PayloadKey,
    PayloadKeyFileError,
    SealedPayloadError,
    StaticKeyRing,
    UnknownPayloadKeyError,
    payload_data_converter,
)
from .ids import agent_job_workflow_id

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "WORKFLOW_TYPE",
    "AesGcmPayloadCodec",
    "AgentJobInput",
    "AgentJobResult",
    "FileKeyRing",
    "PayloadKey",
    "PayloadKeyFileError",
    "SealedPayloadError",
    "StaticKeyRing",
    "UnknownPayloadKeyError",
    "agent_job_workflow_id",
    "connect",
    "payload_data_converter",
    "result",
    "start_agent_job",
]
