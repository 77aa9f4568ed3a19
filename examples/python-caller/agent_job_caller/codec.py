"""The payload codec of agent-job-orchestrator, in Python: AES-256-GCM over a key ring file.

It seals and opens payloads exactly as the TypeScript codec does (src/payload-codec/codec.ts), so
a job started from Python is read by the worker, and the worker's results by Python:

- a sealed payload is the whole original payload (metadata and data, serialized as the
  ``temporal.api.common.v1.Payload`` protobuf message) encrypted with AES-256-GCM; its ``data``
  is a 12-byte random nonce, the ciphertext and the 16-byte tag; its ``metadata`` is
  ``encoding: binary/encrypted``, ``encryption-key-id: <ID>`` and ``encryption-format: 2``, whose
  associated data authenticates the format, the encoding and the key ID (docs/decisions/0023);
  a payload without ``encryption-format`` (format 1, sealed before) had none and still opens;
- unsealed payloads pass ``decode`` unchanged (histories from before the codec);
- the ring is the file TEMPORAL_PAYLOAD_KEYS_FILE names, one ``<key ID> <base64 of 32 bytes>`` a
  line, ``#`` comments and blank lines ignored, the first key sealing and every key opening. It is
  checked again at most once a second on use and re-read when it changed, so a key made current
  in a mounted Secret needs no restart; a payload sealed with a key ID the ring lacks makes one
  immediate re-read before it fails naming that key ID.

No message or exception of this module holds key material: they name the file, the line and the
key ID.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import errno
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import temporalio.converter
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload

SEALED_ENCODING = b"binary/encrypted"
"""The ``encoding`` of a sealed payload."""

KEY_ID_METADATA_KEY = "encryption-key-id"
"""The metadata key naming the key that sealed a payload."""

FORMAT_METADATA_KEY = "encryption-format"
"""The metadata key of the format; absent on format 1 (no associated data)."""

FORMAT = b"2"
"""The format this codec seals: key ID and encoding authenticated."""

KEYS_FILE_SETTING = "TEMPORAL_PAYLOAD_KEYS_FILE"
"""The environment variable naming the key ring file, as the worker and the starter read it."""

KEY_BYTES = 32
"""Bytes of an AES-256 key."""

NONCE_BYTES = 12
TAG_BYTES = 16

# A key ID is written in plain text in every sealed payload and named in errors: kept short and plain.
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")

CHECK_INTERVAL_S = 1.0
"""Shortest time between two checks of the key file on use, as the TypeScript ring's."""


class UnknownPayloadKeyError(Exception):
    """A sealed payload whose key ID the ring lacks, even after a fresh read of the key file."""

    def __init__(self, key_id: str) -> None:
        super().__init__(
            f"a payload is sealed with key {key_id}, which this process's payload key ring "
            f"({KEYS_FILE_SETTING}) does not hold: add that key to the ring"
        )
        self.key_id = key_id


class SealedPayloadError(Exception):
    """A sealed payload that does not open: altered, truncated, or without a key ID."""


class PayloadKeyFileError(Exception):
    """A key ring file that cannot be read at start or holds no usable ring. Names no key."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class PayloadKey:
    """A key of the ring: its ID and 32 bytes."""

    id: str
    key: bytes = dataclasses.field(repr=False)


@dataclass(frozen=True)
class KeyRing:
    """The keys now: ``keys[0]`` seals, any of ``keys`` opens."""

    keys: tuple[PayloadKey, ...]

    @property
    def current(self) -> PayloadKey:
        """The key that seals."""
        return self.keys[0]

    def key(self, key_id: str) -> bytes | None:
        """The key of ``key_id``, or None when the ring lacks it."""
        return next((k.key for k in self.keys if k.id == key_id), None)


def parse_key_ring(text: str) -> KeyRing:
    """The ring in a key file's text.

    Raises:
        ValueError: the reason, naming a line number or a key ID, never key material.
    """
    keys: list[PayloadKey] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if line == "" or line.startswith("#"):
            continue
        fields = line.split()
        where = f"line {number}"
        if len(fields) != 2:
            raise ValueError(f'{where}: expected "<key ID> <base64 of {KEY_BYTES} bytes>"')
        key_id, encoded = fields
        if not _KEY_ID.fullmatch(key_id):
            raise ValueError(f"{where}: a key ID is 1 to 64 of A-Z a-z 0-9 . _ -")
        if not _BASE64.fullmatch(encoded):
            raise ValueError(f"{where}: key {key_id} is not base64")
        # Node's decoder takes base64 without its padding; so does this one.
        padded = encoded + "=" * (-len(encoded) % 4)
        try:
            key = base64.b64decode(padded, validate=True)
        except binascii.Error:
            raise ValueError(f"{where}: key {key_id} is not base64") from None
        keys.append(PayloadKey(key_id, key))
    return _checked(keys)


def key_ring(keys: Sequence[PayloadKey]) -> KeyRing:
    """The ring of ``keys``, the first current.

    Raises:
        ValueError: on an empty list, a bad key ID, a key that is not 32 bytes, or a repeated ID.
    """
    return _checked(list(keys))


def _checked(keys: list[PayloadKey]) -> KeyRing:
    if not keys:
        raise ValueError("it holds no key")
    seen: set[str] = set()
    for k in keys:
        if not _KEY_ID.fullmatch(k.id):
            raise ValueError("a key ID is 1 to 64 of A-Z a-z 0-9 . _ -")
        if len(k.key) != KEY_BYTES:
            raise ValueError(f"key {k.id} is {len(k.key)} bytes, not {KEY_BYTES}")
        if k.id in seen:
            raise ValueError(f"key ID {k.id} appears twice")
        seen.add(k.id)
    return KeyRing(tuple(keys))


class KeyRingSource:
    """Where the codec gets its keys: ``current()`` may check a file, ``refreshed()`` reads it now."""

    def current(self) -> KeyRing:
        """The ring to seal and open with now."""
        raise NotImplementedError

    def refreshed(self) -> KeyRing:
        """The ring after a fresh read, for a key ID the ring lacks."""
        raise NotImplementedError


class StaticKeyRing(KeyRingSource):
    """A ring that never changes: for keys held elsewhere, and for tests."""

    def __init__(self, keys: Sequence[PayloadKey]) -> None:
        self._ring = key_ring(keys)

    def current(self) -> KeyRing:
        return self._ring

    def refreshed(self) -> KeyRing:
        return self._ring


class FileKeyRing(KeyRingSource):
    """A key ring kept in a file, re-read when the file changes.

    A Kubernetes Secret volume is updated by a symlink swap, which file watching misses: the file is
    ``stat``-ed on use instead, at most once per ``check_interval_s``, and read when its identity
    changed. A file that becomes unreadable or malformed keeps the last good ring (a writer caught
    half-way) and is tried again on the next check.
    """

    def __init__(
        self,
        path: str,
        *,
        check_interval_s: float = CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Reads the file once.

        Raises:
            PayloadKeyFileError: when it holds no usable ring.
        """
        self.path = path
        self._interval = check_interval_s
        self._clock = clock
        # The SDK may call the codec from several threads (its data converter runs on the event
        # loop, a caller may share the client): one check of the file at a time.
        self._lock = threading.Lock()
        signature = self._stat()
        try:
            self._ring = parse_key_ring(self._read())
        except OSError as err:
            raise PayloadKeyFileError(path, f"cannot read it: {_code(err)}") from err
        except ValueError as err:
            raise PayloadKeyFileError(path, str(err)) from None
        self._signature = signature
        self._checked_at = clock()

    def current(self) -> KeyRing:
        with self._lock:
            if self._clock() - self._checked_at >= self._interval:
                self._refresh(force=False)
            return self._ring

    def refreshed(self) -> KeyRing:
        with self._lock:
            self._refresh(force=True)
            return self._ring

    def _refresh(self, *, force: bool) -> None:
        self._checked_at = self._clock()
        signature = self._stat()
        if not force and signature == self._signature:
            return
        try:
            ring = parse_key_ring(self._read())
        except (OSError, ValueError):
            # Unusable now (a writer caught half-way, a Secret being swapped): the last good ring
            # stays, and the next check tries again.
            return
        self._signature = signature
        self._ring = ring

    def _read(self) -> str:
        with open(self.path, encoding="utf-8") as file:
            return file.read()

    def _stat(self) -> tuple[int, int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _code(err: OSError) -> str:
    """``ENOENT``, as the TypeScript ring names a read error."""
    return errno.errorcode.get(err.errno or 0, "error")


class AesGcmPayloadCodec(temporalio.converter.PayloadCodec):
    """The AES-256-GCM codec over the keys of ``keys``."""

    def __init__(self, keys: KeyRingSource) -> None:
        self._keys = keys

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Seals every payload with the ring's current key."""
        current = self._keys.current().current
        return [seal(payload, current) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Opens sealed payloads; passes the others unchanged."""
        return [self._open(payload) for payload in payloads]

    def _open(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != SEALED_ENCODING:
            return payload
        key_id = payload.metadata.get(KEY_ID_METADATA_KEY, b"").decode("utf-8", errors="replace")
        if not _KEY_ID.fullmatch(key_id):
            raise SealedPayloadError(f"a sealed payload has no usable {KEY_ID_METADATA_KEY}")
        fmt = payload.metadata.get(FORMAT_METADATA_KEY)
        if fmt is not None and fmt != FORMAT:
            raise SealedPayloadError(f"a payload sealed with key {key_id} has an unknown format")
        # A key made current on another process first is in the file already: read it once more.
        key = self._keys.current().key(key_id)
        if key is None:
            key = self._keys.refreshed().key(key_id)
        if key is None:
            raise UnknownPayloadKeyError(key_id)
        return open_sealed(payload.data, key_id, key, None if fmt is None else _aad(key_id))


def _aad(key_id: str) -> bytes:
    """Format 2's associated data: the format, the encoding and the key ID, none with a space."""
    return FORMAT + b" " + SEALED_ENCODING + b" " + key_id.encode("utf-8")


def seal(payload: Payload, key: PayloadKey) -> Payload:
    """``payload`` sealed with ``key``: a random nonce, the ciphertext and the tag."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key.key).encrypt(nonce, payload.SerializeToString(), _aad(key.id))
    return Payload(
        metadata={
            "encoding": SEALED_ENCODING,
            KEY_ID_METADATA_KEY: key.id.encode("utf-8"),
            FORMAT_METADATA_KEY: FORMAT,
        },
        data=nonce + sealed,
    )


def open_sealed(data: bytes, key_id: str, key: bytes, aad: bytes | None) -> Payload:
    """The payload that ``data`` seals with ``key``; ``aad`` is None for format 1.

    Raises:
        SealedPayloadError: too short, altered, or sealed with another key of that ID.
    """
    if len(data) < NONCE_BYTES + TAG_BYTES:
        raise SealedPayloadError(f"a payload sealed with key {key_id} is too short to be sealed")
    try:
        plain = AESGCM(key).decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], aad)
    except InvalidTag:
        raise SealedPayloadError(
            f"a payload sealed with key {key_id} does not open: "
            "it was altered, or sealed with another key of that ID"
        ) from None
    return Payload.FromString(plain)


def payload_data_converter(keys_file: str | None) -> temporalio.converter.DataConverter:
    """The SDK's default data converter, with the codec over ``keys_file`` when one is given.

    Without a file the codec is off, as on the worker and the starter: payloads are stored as the
    default converter writes them.

    Raises:
        PayloadKeyFileError: when the file holds no usable ring now.
    """
    default = temporalio.converter.default()
    if keys_file is None:
        return default
    return dataclasses.replace(default, payload_codec=AesGcmPayloadCodec(FileKeyRing(keys_file)))
