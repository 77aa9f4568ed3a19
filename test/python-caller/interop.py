"""The Python side of the cross-language tests (test/python-caller/*.test.ts), run in the example's venv.

Reads one JSON list of requests on stdin, answers each in order with one JSON list on stdout.
Payloads travel as base64 of the serialized ``temporal.api.common.v1.Payload`` message, so both
sides compare every metadata entry and data byte. A codec per key file is kept across requests,
so a request after a ``write`` sees the file as the example's codec would in a running process;
their rings read a fake clock, which only ``advance`` moves.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

from agent_job_caller.codec import (
    AesGcmPayloadCodec,
    FileKeyRing,
    PayloadKeyFileError,
    payload_data_converter,
)
from agent_job_caller.ids import agent_job_summary, agent_job_workflow_id, fairness_key
from temporalio.api.common.v1 import Payload

_codecs: dict[str, AesGcmPayloadCodec] = {}
_now = [0.0]


def _codec(path: str) -> AesGcmPayloadCodec:
    if path not in _codecs:
        _codecs[path] = AesGcmPayloadCodec(FileKeyRing(path, clock=lambda: _now[0]))
    return _codecs[path]


def _payload(text: str) -> Payload:
    return Payload.FromString(base64.b64decode(text))


def _text(payload: Payload) -> str:
    return base64.b64encode(payload.SerializeToString()).decode("ascii")


def _error(err: Exception) -> dict[str, Any]:
    return {"error": {"type": type(err).__name__, "message": str(err)}}


async def _answer(request: dict[str, Any]) -> object:
    op = request["op"]
    if op == "seal":
        sealed = await _codec(request["keysFile"]).encode([_payload(p) for p in request["payloads"]])
        return [_text(p) for p in sealed]
    if op == "open":
        # One at a time: each payload's own error (an unknown key ID) is part of the answer.
        codec = _codec(request["keysFile"])
        opened: list[object] = []
        for text in request["payloads"]:
            try:
                opened.append({"payload": _text((await codec.decode([_payload(text)]))[0])})
            except Exception as err:
                # The test reads the type and message of each failure.
                opened.append(_error(err))
        return opened
    if op == "toPayloads":
        converter = payload_data_converter(request["keysFile"])
        return [_text(p) for p in await converter.encode(request["values"])]
    if op == "fromPayloads":
        converter = payload_data_converter(request["keysFile"])
        return await converter.decode([_payload(p) for p in request["payloads"]])
    if op == "write":
        with open(request["path"], "w", encoding="utf-8") as file:
            file.write(request["text"])
        return None
    if op == "advance":
        _now[0] += request["seconds"]
        return None
    if op == "ring":
        try:
            FileKeyRing(request["path"])
            return {"ok": True}
        except PayloadKeyFileError as err:
            return _error(err)
    if op == "workflowIds":
        return [agent_job_workflow_id(project, key) for project, key in request["pairs"]]
    if op == "summaries":
        return [agent_job_summary(project, prompt) for project, prompt in request["pairs"]]
    if op == "fairnessKeys":
        return [fairness_key(project) for project in request["projects"]]
    raise ValueError(f"unknown op {op}")


async def main() -> None:
    """Answers the requests on stdin."""
    requests = json.load(sys.stdin)
    answers = [await _answer(request) for request in requests]
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
