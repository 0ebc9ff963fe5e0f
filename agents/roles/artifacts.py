"""What roles exchange through blob stores: job specs, checkpoint states and manifests.

* **Spec blob**: the job spec's canonical bytes (PROTOCOL §5). Its blob address is
  keccak256(canonical bytes) = the job's `specHash`, so a spec is fetched by the hash the chain
  holds and checked by the store itself.
* **State blob**: the tensors of one state in state order (PROTOCOL §5), each row-major float32
  little-endian, concatenated; shapes come from the spec. Whoever reads one recomputes its state
  root and refuses a mismatch (`BadBlob`).
* **Manifest**: a JSON object naming the checkpoint state roots (steps 0, k, …, T), the state
  blob of each and per-checkpoint training losses. Its root list must hash to the unit's
  committed checkpoint root.
* **Locator** (the unit's `blobLocator` on chain): ``<blob store URL>#<manifest address>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch

from agents.core.blobs import BlobError, BlobStore, open_blob_store
from agents.training import merkle
from agents.training.spec import JobSpec
from agents.training.state import State, param_shape, state_names, state_root


class BadBlob(RuntimeError):
    """A blob or manifest does not match the commitment it is read against."""


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
    def from_bytes(cls, data: bytes) -> Manifest:
        try:
            obj = json.loads(data)
            m = cls(
                obj["spec_hash"],
                list(obj["roots"]),
                list(obj["states"]),
                [float(x) for x in obj["losses"]],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise BadBlob(f"manifest is not valid JSON of the expected shape: {exc}") from None
        if len(m.roots) != len(m.states) or len(m.roots) < 2:
            raise BadBlob("manifest: roots and states differ in length")
        return m

    def checkpoint_root(self) -> bytes:
        return merkle.checkpoint_root([bytes.fromhex(r[2:]) for r in self.roots])


def make_locator(store_url: str, manifest_address: str) -> str:
    return f"{store_url}#{manifest_address}"


def parse_locator(locator: str) -> tuple[str, str]:
    base, sep, address = locator.rpartition("#")
    if not sep or not base or not address.startswith("0x"):
        raise BadBlob(f"blob locator {locator[:120]!r}: expected '<store URL>#0x<address>'")
    return base, address


class CheckpointReader:
    """Reads a unit's manifest and states from its locator, checking every root."""

    def __init__(self, spec: JobSpec, locator: str, checkpoint_root: bytes) -> None:
        self.spec = spec
        base, address = parse_locator(locator)
        try:
            self.store: BlobStore = open_blob_store(base)
        except ValueError as exc:
            raise BadBlob(str(exc)) from None
        try:
            self.manifest = Manifest.from_bytes(self.store.get(address))
        except BlobError as exc:
            raise BadBlob(f"manifest {address}: {exc}") from None
        if self.manifest.checkpoint_root() != checkpoint_root:
            raise BadBlob(
                f"manifest {address} lists roots whose checkpoint root is 0x"
                f"{self.manifest.checkpoint_root().hex()}, the chain has 0x{checkpoint_root.hex()}"
            )

    def root(self, index: int) -> bytes:
        return bytes.fromhex(self.manifest.roots[index][2:])

    def state(self, index: int) -> State:
        address = self.manifest.states[index]
        try:
            st = decode_state(self.spec, self.store.get(address))
        except BlobError as exc:
            raise BadBlob(f"checkpoint {index} blob {address}: {exc}") from None
        if state_root(st) != self.root(index):
            raise BadBlob(
                f"checkpoint {index} blob {address} has state root 0x{state_root(st).hex()}, "
                f"the manifest says {self.manifest.roots[index]}"
            )
        return st
