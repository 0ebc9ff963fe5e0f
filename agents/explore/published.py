"""What the explorer reads from blob stores, each blob checked against the chain as the roles
check it: a job's spec (its address is the chain's spec hash), a version-3 model bundle (its
address is the spec's graph hash), a commitment's manifest (its roots must hash to the committed
checkpoint root: agents/roles/artifacts.py `read_manifest`) and a completed job's final
checkpoint (its root must be the committed final root).

Where from: the stores given with --spec-store, then the store each commitment's locator names
(a solver keeps a copy of the spec and the model there: agents/roles/jobs.py `keep_job`), read
only over http(s) unless --allow-local-locators (dev chains). Blocking I/O: the pages call it in
a worker thread. A blob that does not check, or cannot be had, is a `Unpublished` with one line
saying why; nothing unchecked is shown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agents.core.blobs import BlobError, BlobStore, open_blob_store
from agents.core.bounded import BoundedCache
from agents.explore.config import ExploreConfig
from agents.model.bundle import MAX_BUNDLE_BYTES, Bundle, bundle_from_bytes
from agents.model.job import n_params
from agents.roles.artifacts import (
    BadBlob,
    locator_store,
    parse_locator,
    read_final_state,
    read_manifest,
)
from agents.roles.errors import JobRejected
from agents.roles.jobs import fetch_spec
from agents.roles.runtime import ChainJob, job_runtime
from agents.training.spec import JobSpec, ModelSpec

K = TypeVar("K")
V = TypeVar("V")

#: Specs, kinds, manifests and metrics kept (each small); model bundles kept (each a graph).
CACHE = 1_024
BUNDLES = 8
#: The most parameters of a model whose metric the explorer computes (a model of a job it only
#: lists may be larger: its size is read from the bundle, nothing is trained or evaluated).
METRIC_MAX_PARAMS = 1 << 24


class Unpublished(RuntimeError):
    """A blob the page needs is not to be had, or does not check against the chain."""


@dataclass(frozen=True)
class ModelKind:
    """What the jobs page says of a job's model: its spec version and, for version 3, the
    module's parameter count (from its bundle)."""

    version: int
    params: int | None
    label: str


class Published:
    """The explorer's blob reads, with bounded caches (a blob under a hash never changes)."""

    def __init__(self, cfg: ExploreConfig) -> None:
        self.local_ok = cfg.allow_local_locators
        self.stores = [open_blob_store(url) for url in cfg.spec_stores]
        self._lock = threading.Lock()
        self._specs: BoundedCache[bytes, JobSpec | ModelSpec] = BoundedCache(CACHE)
        self._bundles: BoundedCache[str, Bundle] = BoundedCache(BUNDLES)
        self._manifests: BoundedCache[tuple, list[float]] = BoundedCache(CACHE)
        self._metrics: BoundedCache[tuple, dict[str, float]] = BoundedCache(CACHE)

    def _cached(self, cache: BoundedCache[K, V], key: K, make: Callable[[], V]) -> V:
        with self._lock:
            got = cache.get(key)
        if got is None:
            got = make()
            with self._lock:
                cache.put(key, got)
        return got

    def _stores(self, locators: Sequence[str]) -> list[BlobStore]:
        """The --spec-store stores, then the store of each locator this explorer may read."""
        out = list(self.stores)
        for locator in locators:
            try:
                out.append(locator_store(parse_locator(locator)[0], self.local_ok))
            except BadBlob:
                continue
        return out

    def spec(self, spec_hash: bytes, locators: Sequence[str], what: str) -> JobSpec | ModelSpec:
        """The spec under the chain's `spec_hash` (fetched by its hash, so it checks itself)."""

        def fetch() -> JobSpec | ModelSpec:
            stores = self._stores(locators)
            if not stores:
                raise Unpublished(
                    f"{what}: no blob store to read its spec from (no commitment "
                    "yet; --spec-store names one)"
                )
            try:
                return fetch_spec(spec_hash, stores, what, max_params=1 << 62)
            except JobRejected as exc:
                raise Unpublished(str(exc)) from None

        return self._cached(self._specs, bytes(spec_hash), fetch)

    def bundle(self, spec: ModelSpec, locators: Sequence[str], what: str) -> Bundle:
        """A version-3 spec's model bundle (its store address is the spec's graph hash)."""

        def fetch() -> Bundle:
            for store in self._stores(locators):
                try:
                    raw = store.get(spec.graph, max_bytes=MAX_BUNDLE_BYTES)
                except (BlobError, ValueError):
                    continue
                try:
                    return bundle_from_bytes(raw)
                except Exception as exc:  # anyone's data: no error of it may escape
                    raise Unpublished(
                        f"{what}: model bundle {spec.graph[:18]}… is not a "
                        f"bundle ({str(exc)[:160]})"
                    ) from None
            raise Unpublished(f"{what}: model bundle {spec.graph[:18]}… not found in any store")

        return self._cached(self._bundles, spec.graph, fetch)

    def kind(self, spec_hash: bytes, locators: Sequence[str], what: str) -> ModelKind:
        """The job's model kind (spec version; a version-3 module's parameter count)."""
        spec = self.spec(spec_hash, locators, what)
        if isinstance(spec, ModelSpec):
            params = n_params(self.bundle(spec, locators, what))
            return ModelKind(spec.version, params, f"v{spec.version} · {params:,} parameters")
        return ModelKind(
            spec.version, spec.n_params, f"v{spec.version} · MLP {'-'.join(map(str, spec.widths))}"
        )

    def losses(self, locator: str, checkpoints: int, checkpoint_root: bytes) -> list[float]:
        """The per-checkpoint training losses of a commitment's manifest, whose roots hash to
        the committed `checkpoint_root` (Unpublished otherwise)."""

        def fetch() -> list[float]:
            try:
                _, manifest = read_manifest(locator, checkpoints, checkpoint_root, self.local_ok)
            except BadBlob as exc:
                raise Unpublished(f"the published checkpoints do not check: {exc}") from None
            return list(manifest.losses)

        return self._cached(self._manifests, (locator, checkpoints, bytes(checkpoint_root)), fetch)

    def metric(
        self, job: Any, locator: str, published_root: bytes, final_root: bytes, what: str
    ) -> dict[str, float]:
        """A completed job's held-out metric (`job fetch`'s: test accuracy or validation
        loss), of its final checkpoint checked against the committed roots."""

        def compute() -> dict[str, float]:
            spec = self.spec(bytes(job.specHash), [locator], what)
            stores = self._stores([locator])
            try:
                rt = job_runtime(spec, ChainJob.of(job), stores, what, METRIC_MAX_PARAMS, None)
                st, _ = read_final_state(rt, locator, published_root, final_root, self.local_ok)
                return rt.metrics(st)
            except JobRejected as exc:
                raise Unpublished(str(exc)) from None
            except BadBlob as exc:
                raise Unpublished(f"{what}: the final checkpoint does not check: {exc}") from None

        key = (bytes(job.specHash), locator, bytes(published_root), bytes(final_root))
        return self._cached(self._metrics, key, compute)
