"""What roles exchange through blob stores: job specs, checkpoint states and manifests.

* **Spec blob**: the job spec's canonical bytes (PROTOCOL §5). Its blob address is
  keccak256(canonical bytes) = the job's `specHash`, so a spec is fetched by the hash the chain
  holds and checked by the store itself.
* **State blob**: the tensors of one state in state order (PROTOCOL §5), each row-major float32
  little-endian, concatenated; shapes come from the spec. Whoever reads one recomputes its state
  root and refuses a mismatch (`BadBlob`).
* **Manifest**: a JSON object naming the checkpoint state roots (steps 0, k, …, T), the state
  blob of each and per-checkpoint training losses. Its root list must hash to the unit's
  committed checkpoint root. Checked when parsed: `version` 1, `spec_hash` and each root
  "0x" + 64 lower-case hex digits, each state a blob address, one loss (a number) per root, and
  where the reader knows the job exactly T/k + 1 of each.
* **Locator** (the unit's `blobLocator` on chain): ``<blob store URL>#<manifest address>``.
  Anyone who commits writes one, so a reader opens only an http(s) store from it
  (`locator_store`); a local folder only when its operator allows that (dev chains).

Whatever a solver's data holds, reading it raises `BadBlob` (never another error), and every
read is capped at the size the job implies.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from agents.core.blobs import (
    DEFAULT_MAX_BLOB_BYTES,
    BlobStore,
    HttpBackend,
    check_address,
    open_blob_store,
)
from agents.training import merkle
from agents.training.spec import JobSpec
from agents.training.state import State, param_shape, state_names, state_root

_HEX256 = re.compile(r"^0x[0-9a-f]{64}$")
# a manifest entry is a root (69 bytes of JSON), a blob address (69) and a loss (≤ 25)
_MANIFEST_BYTES_PER_CHECKPOINT = 256
# seconds a locator read may take beyond its size at the store's minimum rate (blobs.py)
LOCATOR_TIMEOUT_S = 30.0


class BadBlob(RuntimeError):
    """A blob or manifest does not match the commitment it is read against."""


@contextlib.contextmanager
def _bad_blob(what: str) -> Iterator[None]:
    """Any error reading or decoding a solver's data is that data's fault: BadBlob, which
    every caller handles as "unavailable" (retry, then its own replay)."""
    try:
        yield
    except Exception as exc:  # the data is anyone's: no error of it may escape
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise BadBlob(f"{what}: {reason}") from None


def state_bytes(spec: JobSpec) -> int:
    """The exact size of a state blob of `spec`."""
    return 4 * sum(
        math.prod(param_shape(spec.widths, name.removeprefix("m.")))
        for name in state_names(spec.widths)
    )


def manifest_max_bytes(checkpoints: int) -> int:
    return min(DEFAULT_MAX_BLOB_BYTES, 4096 + _MANIFEST_BYTES_PER_CHECKPOINT * checkpoints)


def encode_state(st: State) -> bytes:
    return b"".join(
        t.detach().cpu().contiguous().numpy().astype("<f4").tobytes() for t in st.values()
    )


def decode_state(spec: JobSpec, data: bytes) -> State:
    st: State = {}
    off = 0
    for name in state_names(spec.widths):
        shape = param_shape(spec.widths, name.removeprefix("m."))
        n = shape[0] * shape[1] * 4
        if off + n > len(data):
            raise BadBlob(f"state blob too short: {len(data)} bytes for widths {spec.widths}")
        arr = np.frombuffer(data[off : off + n], dtype="<f4").reshape(shape).astype(np.float32)
        st[name] = torch.from_numpy(arr.copy())
        off += n
    if off != len(data):
        raise BadBlob(f"state blob has {len(data) - off} trailing bytes")
    return st


class StateCodec(Protocol):
    """What reading a job's checkpoints needs of the job: its shape in steps, the exact size of
    a state blob, and how a blob decodes (BadBlob on a wrong size) and a state roots. A job
    runtime is one (agents/roles/runtime.py); `MlpCodec` is a version-1 spec's own."""

    @property
    def steps(self) -> int: ...

    @property
    def checkpoint_every(self) -> int: ...

    @property
    def state_bytes(self) -> int: ...

    def decode_state(self, data: bytes) -> State: ...

    def state_root(self, st: State) -> bytes: ...


@dataclass(frozen=True)
class MlpCodec:
    """The states of a version-1 (or a version-2 unit's) MLP spec: tensors by widths."""

    spec: JobSpec

    @property
    def steps(self) -> int:
        return self.spec.steps

    @property
    def checkpoint_every(self) -> int:
        return self.spec.checkpoint_every

    @property
    def state_bytes(self) -> int:
        return state_bytes(self.spec)

    def decode_state(self, data: bytes) -> State:
        return decode_state(self.spec, data)

    def state_root(self, st: State) -> bytes:
        return state_root(st)


def as_codec(codec: StateCodec | JobSpec) -> StateCodec:
    """A version-1 spec stands for its own codec."""
    return MlpCodec(codec) if isinstance(codec, JobSpec) else codec


@dataclass(frozen=True)
class Manifest:
    spec_hash: str
    roots: list[str]  # state roots at steps 0, k, ..., T
    states: list[str]  # blob address of each checkpoint state
    losses: list[float]  # the batch loss at each checkpoint's step (last: at step T-1's state)

    def to_bytes(self) -> bytes:
        obj = {
            "version": 1,
            "spec_hash": self.spec_hash,
            "roots": self.roots,
            "states": self.states,
            "losses": self.losses,
        }
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, checkpoints: int | None = None) -> Manifest:
        """Parse and check a manifest; `checkpoints` (T/k + 1, where the caller knows the job)
        is the length its lists must have. Anything else raises BadBlob."""
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise BadBlob(f"manifest is not valid JSON: {str(exc)[:200]}") from None
        if not isinstance(obj, dict) or obj.get("version") != 1:
            raise BadBlob("manifest: not a JSON object of version 1")
        spec_hash, roots = obj.get("spec_hash"), obj.get("roots")
        states, losses = obj.get("states"), obj.get("losses")
        if not isinstance(spec_hash, str) or not _HEX256.match(spec_hash):
            raise BadBlob("manifest: spec_hash is not 0x + 64 lower-case hex digits")
        if not all(isinstance(x, list) for x in (roots, states, losses)):
            raise BadBlob("manifest: roots, states and losses must be lists")
        if not len(roots) == len(states) == len(losses):
            raise BadBlob("manifest: roots, states and losses differ in length")
        if len(roots) < 2 or checkpoints is not None and len(roots) != checkpoints:
            want = checkpoints if checkpoints is not None else "at least 2"
            raise BadBlob(f"manifest: {len(roots)} checkpoints, the job has {want}")
        if not all(isinstance(r, str) and _HEX256.match(r) for r in roots):
            raise BadBlob("manifest: a root is not 0x + 64 lower-case hex digits")
        if not all(isinstance(a, str) and _HEX256.match(a.lower()) for a in states):
            raise BadBlob("manifest: a state is not a blob address")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in losses):
            raise BadBlob("manifest: a loss is not a number")
        return cls(spec_hash, roots, [check_address(a) for a in states],
                   [float(x) for x in losses])  # fmt: skip

    def checkpoint_root(self) -> bytes:
        return merkle.checkpoint_root([bytes.fromhex(r[2:]) for r in self.roots])


def make_locator(store_url: str, manifest_address: str) -> str:
    return f"{store_url}#{manifest_address}"


def parse_locator(locator: str) -> tuple[str, str]:
    if not isinstance(locator, str):
        raise BadBlob("blob locator is not a string")
    base, sep, address = locator.rpartition("#")
    if not sep or not base or not address.startswith("0x"):
        raise BadBlob(f"blob locator {locator[:120]!r}: expected '<store URL>#0x<address>'")
    return base, address


def locator_store(
    base: str, local_ok: bool = False, timeout_s: float = LOCATOR_TIMEOUT_S
) -> BlobStore:
    """The store a locator (read from the chain: anyone's) names, opened read-only.

    Only http(s)://host: a local path or file:// would make the reader touch its own disk
    where the solver says, and s3:// would sign requests with the reader's credentials for a
    bucket (and, with ?endpoint=, a host) of the solver's choosing; a solver on S3 publishes its
    bucket's https URL instead. `local_ok` (--allow-local-locators, dev chains only) also
    accepts a folder, as when every agent shares one."""
    parsed = urllib.parse.urlparse(base)
    if parsed.scheme in ("http", "https") and parsed.hostname:
        return BlobStore(HttpBackend(base, timeout_s))
    if local_ok and parsed.scheme in ("", "file"):
        return open_blob_store(base)  # a LocalDirBackend: reading creates nothing
    raise BadBlob(
        f"blob locator store {base[:120]!r}: only http(s):// URLs are read"
        + ("" if local_ok else " (a local folder only with --allow-local-locators)")
    )


def locator_problem(base: str, local_ok: bool = False) -> str | None:
    """Why readers refuse locators naming `base` (None: they read them), for a publisher."""
    try:
        locator_store(base, local_ok)
    except BadBlob as exc:
        return str(exc)
    return None


def read_manifest(
    locator: str,
    checkpoints: int,
    checkpoint_root: bytes,
    local_ok: bool = False,
    timeout_s: float = LOCATOR_TIMEOUT_S,
) -> tuple[BlobStore, Manifest]:
    """The store `locator` names and the manifest behind it, of `checkpoints` entries, whose
    roots hash to the committed `checkpoint_root`; BadBlob for anything else (unreachable,
    oversized, malformed, another root). What a reader of losses alone needs (the explorer);
    `CheckpointReader` reads the states on top of it."""
    base, address = parse_locator(locator)
    with _bad_blob(f"manifest {address}"):
        # the deadline grows with the largest blob read (blobs.py: at 1 MiB/s)
        store = locator_store(base, local_ok, timeout_s)
        raw = store.get(address, max_bytes=manifest_max_bytes(checkpoints))
        manifest = Manifest.from_bytes(raw, checkpoints)
        cp_root = manifest.checkpoint_root()
    if cp_root != checkpoint_root:
        raise BadBlob(
            f"manifest {address} lists roots whose checkpoint root is 0x"
            f"{cp_root.hex()}, the chain has 0x{checkpoint_root.hex()}"
        )
    return store, manifest


class CheckpointReader:
    """Reads a unit's manifest and states from its locator, checking every root; any failure
    (unreachable, oversized, malformed, a wrong root) raises BadBlob."""

    def __init__(
        self,
        codec: StateCodec | JobSpec,
        locator: str,
        checkpoint_root: bytes,
        local_ok: bool = False,
        timeout_s: float = LOCATOR_TIMEOUT_S,
    ) -> None:
        self.codec = codec = as_codec(codec)
        self.checkpoints = codec.steps // codec.checkpoint_every + 1
        self.state_bytes = codec.state_bytes
        self.store, self.manifest = read_manifest(
            locator, self.checkpoints, checkpoint_root, local_ok, timeout_s
        )

    def root(self, index: int) -> bytes:
        self._check_index(index)
        return bytes.fromhex(self.manifest.roots[index][2:])

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self.manifest.roots):
            raise BadBlob(f"checkpoint {index}: the manifest has {len(self.manifest.roots)}")

    def state(self, index: int) -> State:
        self._check_index(index)
        address = self.manifest.states[index]
        with _bad_blob(f"checkpoint {index} blob {address}"):
            st = self.codec.decode_state(self.store.get(address, max_bytes=self.state_bytes))
        got = self.codec.state_root(st)
        if got != self.root(index):
            raise BadBlob(
                f"checkpoint {index} blob {address} has state root 0x{got.hex()}, "
                f"the manifest says {self.manifest.roots[index]}"
            )
        return st


@dataclass(frozen=True)
class Checkpoints:
    """The part of a unit's checkpoints a role's work needs, read and checked in one go
    (`fetch_checkpoints`): every checkpoint root of the manifest and the states asked for. The
    same interface as `CheckpointReader`'s (`root`, `state`, `manifest`) without any I/O, so a
    replay runs on it in the round after a background read (agents/core/fetches.py)."""

    manifest: Manifest
    states: dict[int, State]

    @property
    def checkpoints(self) -> int:
        return len(self.manifest.roots)

    def root(self, index: int) -> bytes:
        if not 0 <= index < len(self.manifest.roots):
            raise BadBlob(f"checkpoint {index}: the manifest has {len(self.manifest.roots)}")
        return bytes.fromhex(self.manifest.roots[index][2:])

    def state(self, index: int) -> State:
        if index not in self.states:
            raise BadBlob(f"checkpoint {index} was not read")
        return self.states[index]


def fetch_checkpoints(
    codec: StateCodec | JobSpec,
    locator: str,
    checkpoint_root: bytes,
    indices: list[int],
    local_ok: bool = False,
    timeout_s: float = LOCATOR_TIMEOUT_S,
) -> Checkpoints:
    """Read the manifest behind `locator` and the states at `indices`, each checked against the
    committed `checkpoint_root` (BadBlob on anything else). Blocking: roles run it off the round
    loop (`Reads`), with `timeout_s` no longer than their read budget."""
    reader = CheckpointReader(codec, locator, checkpoint_root, local_ok, timeout_s)
    return Checkpoints(reader.manifest, {i: reader.state(i) for i in sorted(set(indices))})


def read_final_state(
    codec: StateCodec | JobSpec,
    locator: str,
    published_root: bytes,
    final_root: bytes,
    local_ok: bool = False,
) -> tuple[State, list[float]]:
    """A unit's trained model: the last checkpoint behind `locator` and the manifest's losses,
    every root checked — the manifest's against the `published_root` the data was committed
    under, the state's against its manifest root, and that root against the unit's committed
    `final_root`. BadBlob for any failure: nothing unchecked is returned."""
    codec = as_codec(codec)
    reader = CheckpointReader(codec, locator, published_root, local_ok)
    st = reader.state(reader.checkpoints - 1)
    got = codec.state_root(st)
    if got != final_root:
        raise BadBlob(
            f"the final checkpoint's state root 0x{got.hex()} is not the committed "
            f"final state root 0x{final_root.hex()}"
        )
    return st, list(reader.manifest.losses)


def read_result(
    codec: StateCodec | JobSpec,
    locator: str,
    published_root: bytes,
    final_root: bytes,
    holders: tuple[str, ...] = (),
    local_ok: bool = False,
) -> tuple[State, list[float]]:
    """A unit's trained model from its solver (`read_final_state`: with the manifest's losses),
    else from the first holder that serves it (`read_served_state`, no losses). BadBlob with
    the solver's failure when no copy checks."""
    try:
        return read_final_state(codec, locator, published_root, final_root, local_ok)
    except BadBlob as first:
        for held in holders:
            try:
                return read_served_state(codec, held, final_root, local_ok), []
            except BadBlob:
                continue
        raise first from None


def read_served_state(
    codec: StateCodec | JobSpec,
    locator: str,
    root: bytes,
    local_ok: bool = False,
    timeout_s: float = LOCATOR_TIMEOUT_S,
) -> State:
    """A state a holder serves (a data request's answer or a `DataOffered` locator,
    ``<store URL>#<state blob address>``, PROTOCOL §6.11), checked against the state root `root`
    it must have: BadBlob for any failure, nothing unchecked is returned."""
    codec = as_codec(codec)
    base, address = parse_locator(locator)
    with _bad_blob(f"state blob {address}"):
        store = locator_store(base, local_ok, timeout_s)
        st = codec.decode_state(store.get(address, max_bytes=codec.state_bytes))
    got = codec.state_root(st)
    if got != root:
        raise BadBlob(f"state blob {address} has state root 0x{got.hex()}, not 0x{root.hex()}")
    return st
