"""Partial, checked fetches of a packed dataset (PROTOCOL §4.4): which chunks a piece of work
needs, fetching each from a list of stores with fallback, checking it before use, and a disk
cache within a byte budget.

Trust: nothing fetched is trusted. A manifest is addressed by keccak-256 of its bytes (the blob
store checks it) and checked on parse (its chunk roots fold to each tensor's data root, its
tensor roots give the dataset root the spec carries). A chunk blob is checked by its store
against its keccak address, then here against its subtree root and length; a chunk that fails
anything is dropped (and deleted from the cache) and the next store is asked. A role's dataset
root check (the spec's root against the materialised split) closes the loop.

Where a process gets chunks from is its `FetchConfig`, handed down by whoever opens a dataset
(a role's or `train`'s from its flags and their VTP_DATASET_* variables, agents/cli/options.py):
the stores tried in order, a disk cache within a budget, the largest dataset it materialises (a
manifest over it is refused before any chunk).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from agents.core.blobs import BlobError, BlobStore, open_blob_store
from agents.data import packed
from agents.data.builtin import Dataset, DatasetError
from agents.data.tokens import TokenDataset
from agents.training import merkle
from agents.training.keccak import keccak256
from agents.training.schedule import batch_indices

DEFAULT_CACHE_BYTES = 1 << 30
MAX_MANIFEST_BYTES = 1 << 28  # 2^22 chunk entries: a 4 TiB dataset at 1 MiB chunks


class ChunkUnavailable(DatasetError):
    """No store had a good copy of a chunk (or of the manifest)."""


def store_url(url: str) -> str:
    """A dataset store's URL, checked that a blob backend reads it (ValueError: why not)."""
    url = url.strip()
    open_blob_store(url)
    return url


def cache_folder(path: str) -> str:
    """The chunk cache's folder, made here (ValueError: why it cannot be)."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot make the folder: {e.strerror}") from None
    return path


def mib_bytes(text: str) -> int:
    """A whole number of MiB, at least 1, in bytes."""
    try:
        n = int(text)
    except ValueError:
        raise ValueError("expected a whole number of MiB >= 1") from None
    if n < 1:
        raise ValueError("expected a whole number of MiB >= 1")
    return n << 20


# The settings of a packed dataset's fetch. The field metadata is how the CLI offers each one
# (agents/cli/options.py: its flag, its environment variable, its help); a field without it is
# not settable there.
@dataclass(frozen=True)
class FetchConfig:
    stores: tuple[str, ...] = field(default=(), metadata={
        "flag": "--data-store", "env": "VTP_DATASET_STORES", "parse": store_url, "metavar": "URL",
        "help": "a packed dataset's store (repeatable), tried in order before the job's own "
                "blob stores; any --blob-url form"})  # fmt: skip
    cache_dir: str | None = field(default=None, metadata={
        "flag": "--data-cache", "env": "VTP_DATASET_CACHE", "parse": cache_folder,
        "metavar": "DIR", "help": "a folder caching the dataset chunks fetched, re-checked on "
                                  "every read (default: no cache)"})  # fmt: skip
    cache_bytes: int = field(default=DEFAULT_CACHE_BYTES, metadata={
        "flag": "--data-cache-mib", "env": "VTP_DATASET_CACHE_MIB", "parse": mib_bytes,
        "metavar": "MIB", "default": DEFAULT_CACHE_BYTES >> 20,
        "help": "--data-cache's disk budget, least recently used chunks out first"})  # fmt: skip
    timeout_s: float = 30.0
    max_dataset_bytes: int | None = field(default=None, metadata={
        "flag": "--max-dataset-mib", "env": "VTP_MAX_DATASET_MIB", "parse": mib_bytes,
        "metavar": "MIB", "help": "refuse a packed dataset larger than this, before fetching "
                                  "any chunk (default: no limit)"})  # fmt: skip

    def with_stores(self, *stores: str) -> FetchConfig:
        """These settings with `stores` tried after mine (each store once): a spec's recorded
        stores and its job's blob store, after the ones the user named."""
        added = tuple(dict.fromkeys(u for u in stores if u not in self.stores))
        return replace(self, stores=(*self.stores, *added))


@dataclass
class FetchStats:
    chunks: int = 0  # chunks taken from stores
    bytes: int = 0  # their bytes
    cache_hits: int = 0
    rejected: list[str] = field(default_factory=list)  # one line per bad or missing copy


class DiskCache:
    """Chunk blobs by address in one folder, least recently used evicted beyond `budget`.
    Entries are re-checked on every read (a disk may rot); a bad one is deleted."""

    def __init__(self, folder: str | Path, budget: int) -> None:
        self.folder = Path(folder)
        self.budget = budget
        self.folder.mkdir(parents=True, exist_ok=True)
        self.used = sum(p.stat().st_size for p in self._entries())

    def _entries(self) -> list[Path]:
        return [p for p in self.folder.iterdir() if p.name.startswith("0x") and p.is_file()]

    def get(self, address: str) -> bytes | None:
        p = self.folder / address
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return None
        os.utime(p)  # recency for eviction
        return data

    def drop(self, address: str) -> None:
        p = self.folder / address
        with contextlib.suppress(FileNotFoundError):
            self.used -= p.stat().st_size
            p.unlink()

    def put(self, address: str, data: bytes) -> None:
        if len(data) > self.budget or (self.folder / address).exists():
            return
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, self.folder / address)
        self.used += len(data)
        if self.used > self.budget:
            self._evict()

    def _evict(self) -> None:
        def mtime(p: Path) -> float:
            try:
                return p.stat().st_mtime
            except FileNotFoundError:  # another process sharing the folder evicted it
                return 0.0

        for p in sorted(self._entries(), key=mtime):
            if self.used <= self.budget:
                return
            self.drop(p.name)


class ChunkFetcher:
    """Checked chunk reads of one manifest from stores in order, through an optional cache."""

    def __init__(self, manifest: packed.Manifest, stores: Sequence[BlobStore],
                 cache: DiskCache | None = None) -> None:  # fmt: skip
        self.manifest = manifest
        self.stores = list(stores)
        self.cache = cache
        self.stats = FetchStats()

    def _check(self, t: packed.TensorEntry, i: int, blob: bytes, addressed: bool) -> str | None:
        """Why `blob` is not chunk i of t (None: it is); `addressed`: a store already matched
        its keccak to the address (a cache file was not)."""
        first, end = t.chunk_span(i)
        if len(blob) != 4 * (end - first):
            return f"{len(blob)} bytes, not {4 * (end - first)}"
        if not addressed and "0x" + keccak256(blob).hex() != t.chunks[i].address:
            return "wrong content address"
        root = packed.chunk_root_of_blob(blob, t.is_f32, t.chunk_leaves)
        if "0x" + root.hex() != t.chunks[i].root:
            return "subtree root does not match the manifest"
        return None

    def chunk(self, split: str, tensor: str, i: int) -> np.ndarray:
        """Chunk i of a tensor as uint32 words, checked; ChunkUnavailable if no store has it."""
        t = self._tensor(split, tensor)
        ref = t.chunks[i]
        if self.cache is not None and (blob := self.cache.get(ref.address)) is not None:
            if self._check(t, i, blob, addressed=False) is None:
                self.stats.cache_hits += 1
                return packed.blob_words(blob)
            self.stats.rejected.append(f"cache: chunk {ref.address} failed its check")
            self.cache.drop(ref.address)
        first, end = t.chunk_span(i)
        for store in self.stores:
            try:
                blob = store.get(ref.address, max_bytes=4 * (end - first))
            except (BlobError, OSError) as e:
                self.stats.rejected.append(f"{store.backend!r}: {str(e).splitlines()[0][:200]}")
                continue
            why = self._check(t, i, blob, addressed=True)
            if why is not None:
                self.stats.rejected.append(f"{store.backend!r}: chunk {ref.address}: {why}")
                continue
            self.stats.chunks += 1
            self.stats.bytes += len(blob)
            if self.cache is not None:
                self.cache.put(ref.address, blob)
            return packed.blob_words(blob)
        raise ChunkUnavailable(
            f"chunk {i} of {split}.{tensor} ({ref.address}) is in none of the "
            f"{len(self.stores)} dataset stores with the right content"
        )

    def _tensor(self, split: str, tensor: str) -> packed.TensorEntry:
        s = self.manifest.split(split)
        if s is None:
            raise DatasetError(f"the packed dataset has no {split} split")
        return s.tensor(tensor)

    def tensor_words(self, split: str, tensor: str) -> np.ndarray:
        t = self._tensor(split, tensor)
        return np.concatenate([self.chunk(split, tensor, i) for i in range(len(t.chunks))])

    # -- what a piece of work needs ------------------------------------------------------

    def chunks_for_examples(self, split: str, indices: Iterable[int]) -> set[tuple[str, int]]:
        """(tensor, chunk) pairs holding these examples' features and labels."""
        x, y = self._tensor(split, "x"), self._tensor(split, "y")
        per_x, per_y = x.chunk_leaves * 64, y.chunk_leaves * 64
        out: set[tuple[str, int]] = set()
        for i in {int(i) for i in indices}:
            a, b = i * x.cols, (i + 1) * x.cols - 1
            out.update(("x", c) for c in range(a // per_x, b // per_x + 1))
            out.add(("y", i // per_y))
        return out

    def chunks_for_windows(self, split: str, offsets: Iterable[int],
                           context: int) -> set[tuple[str, int]]:  # fmt: skip
        """(tensor, chunk) pairs holding the windows tok[off .. off + context] (§4.3)."""
        t = self._tensor(split, "tokens")
        per = t.chunk_leaves * 64
        out: set[tuple[str, int]] = set()
        for off in {int(o) for o in offsets}:
            out.update(("tokens", c) for c in range(off // per, (off + context) // per + 1))
        return out

    def fetch(
        self, split: str, needed: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], np.ndarray]:
        return {k: self.chunk(split, *k) for k in sorted(needed)}

    def examples(self, split: str, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(x rows, labels) of these examples from only the chunks they touch, all checked."""
        got = self.fetch(split, self.chunks_for_examples(split, indices))
        x, y = self._tensor(split, "x"), self._tensor(split, "y")
        per_x, per_y = x.chunk_leaves * 64, y.chunk_leaves * 64

        def gather(tensor: str, per: int, elems: np.ndarray) -> np.ndarray:
            out, where = np.empty(elems.size, np.uint32), elems // per
            for c in np.unique(where):
                sel = where == c
                out[sel] = got[(tensor, int(c))][elems[sel] - int(c) * per]
            return out

        idx = np.asarray(indices, dtype=np.int64)
        cells = (idx[:, None] * x.cols + np.arange(x.cols)[None, :]).reshape(-1)
        rows = gather("x", per_x, cells).reshape(idx.size, x.cols)
        labels = gather("y", per_y, idx).astype(np.int64)
        return torch.from_numpy(rows.view(np.float32)), torch.from_numpy(labels)

    def open_split(self, split: str = "train") -> FetchingDataset | FetchingTokens:
        """The split as a dataset whose chunks are fetched when a step's batch first reads them
        (a role's replay of a few segments fetches only those batches' chunks; a whole run
        fetches every chunk once). Nothing is fetched here."""
        m, s = self.manifest, self.manifest.split(split)
        if s is None:
            raise DatasetError(f"the packed dataset has no {split} split")
        name = m.name() if split == "train" else f"{m.name()}/{split}"
        filler = ChunkFiller(self, split)
        if m.kind == "tokens":
            toks = torch.from_numpy(filler.buffers["tokens"])
            vocab = tuple(str(v) for v in range(m.classes))
            return FetchingTokens(name, toks, vocab, self, filler, s.root)
        x = torch.from_numpy(filler.buffers["x"].view(np.float32).reshape(s.n, -1))
        y = torch.from_numpy(filler.buffers["y"].reshape(1, -1))
        return FetchingDataset(name, x, y, m.classes, self, filler, s.root)

    # -- a whole split ---------------------------------------------------------------------

    def load(self, split: str = "train"):
        """The split as the engine's Dataset (classification) or TokenDataset (tokens)."""
        m, s = self.manifest, self.manifest.split(split)
        if s is None:
            raise DatasetError(f"the packed dataset has no {split} split")
        name = m.name() if split == "train" else f"{m.name()}/{split}"
        if m.kind == "tokens":
            toks = self.tensor_words(split, "tokens").astype(np.int64)
            vocab = tuple(str(v) for v in range(m.classes))
            return PackedTokens(name, torch.from_numpy(toks), vocab, self)
        x = self.tensor_words(split, "x").view(np.float32).reshape(s.n, -1)
        y = self.tensor_words(split, "y").astype(np.int64).reshape(1, -1)
        return PackedDataset(name, torch.from_numpy(x), torch.from_numpy(y), m.classes, self)

    def held_out(self):
        """The validation split, whole (None when the manifest has none)."""
        return self.load("validation") if self.manifest.split("validation") else None


@dataclass(frozen=True)
class PackedDataset(Dataset):
    """A classification split of a packed dataset: its class count is the manifest's (a split
    need not hold every class), not the largest label + 1; `source` is the fetcher it came
    from (its held-out split comes from the same stores)."""

    declared_classes: int = 0
    source: ChunkFetcher | None = field(default=None, compare=False, repr=False)

    @property
    def classes(self) -> int:
        return self.declared_classes


@dataclass(frozen=True)
class PackedTokens(TokenDataset):
    """A token split of a packed dataset, with the fetcher it came from."""

    source: ChunkFetcher | None = field(default=None, compare=False, repr=False)


class ChunkFiller:
    """Full-size buffers of one split's tensors (zero pages until written: the OS commits only
    what is filled) into which chunks are fetched, checked, once each, as work first needs
    them. A chunk no store has whole raises ChunkUnavailable and nothing of it is written: a
    bad chunk is never trained on. A label or token outside the declared classes or vocabulary
    is refused as the chunk is filled (the engine indexes by it)."""

    def __init__(self, fetcher: ChunkFetcher, split: str) -> None:
        s = fetcher.manifest.split(split)
        assert s is not None
        self.fetcher, self.split, self.entry = fetcher, split, s
        # x keeps its words (its float32 view is the engine's X); y and tokens are int64
        self.buffers = {t.name: np.zeros(t.numel, np.uint32 if t.name == "x" else np.int64)
                        for t in s.tensors}  # fmt: skip
        self.filled: set[tuple[str, int]] = set()

    @property
    def chunk_count(self) -> int:
        return sum(len(t.chunks) for t in self.entry.tensors)

    def fill(self, needed: Iterable[tuple[str, int]]) -> None:
        for tensor, c in sorted(set(needed) - self.filled):
            words = self.fetcher.chunk(self.split, tensor, c)
            if tensor != "x" and words.size and int(words.max()) >= self.fetcher.manifest.classes:
                what = "label" if tensor == "y" else "token"
                raise DatasetError(
                    f"chunk {c} of {self.split}.{tensor} holds {what} {int(words.max())}, "
                    f"outside the manifest's {self.fetcher.manifest.classes}"
                )
            first, end = self.entry.tensor(tensor).chunk_span(c)
            self.buffers[tensor][first:end] = words
            self.filled.add((tensor, c))

    def complete(self) -> None:
        """Every chunk (an engine that copies the whole split onto its device)."""
        self.fill((t.name, c) for t in self.entry.tensors for c in range(len(t.chunks)))

    def open_elements(self, k: int, elems: Iterable[int]) -> tuple:
        """The Opening (tensor root, list proof, data root, [(leaf, leaf words, siblings)]) of
        these elements of the split's k-th tensor against its dataset root, from only the chunks
        holding them (§4.4): a chunk is an aligned subtree, so each leaf's path is the proof
        inside its chunk, then the manifest's chunk roots above it; the tensor roots come from
        the manifest. Bit for bit the opening the whole tensor gives."""
        t = self.entry.tensors[k]
        per = t.chunk_leaves * merkle.LEAF_ELEMS
        leaves = sorted({int(e) // merkle.LEAF_ELEMS for e in elems})
        self.fill((t.name, leaf * merkle.LEAF_ELEMS // per) for leaf in leaves)
        by_chunk: dict[int, list[int]] = {}
        for leaf in leaves:
            by_chunk.setdefault(leaf * merkle.LEAF_ELEMS // per, []).append(leaf)
        opened = []
        for c, in_chunk in by_chunk.items():
            first, end = t.chunk_span(c)
            words = self.buffers[t.name][first:end].astype(np.uint32)  # y, tokens: int64 here
            starts = [leaf * merkle.LEAF_ELEMS for leaf in in_chunk]
            for leaf, ep in zip(in_chunk, packed.element_proofs_from_chunk(t, c, words, starts),
                                strict=True):  # fmt: skip
                opened.append((leaf, ep.chunk, list(ep.siblings)))
        roots = [e.tensor_root() for e in self.entry.tensors]
        list_proof = merkle.list_proof(merkle.DATASET_DOMAIN, roots, k).siblings
        droot = bytes.fromhex(t.data_root[2:])
        return (roots[k], list(list_proof), droot, opened)


class _FetchingSplit:
    """What a packed split fetching its chunks on demand adds to its dataset kind: the manifest's
    root, the rest of the split on request, and a dispute's openings from the opened chunks."""

    filler: ChunkFiller | None
    manifest_root: str

    def root(self) -> bytes:
        return bytes.fromhex(self.manifest_root[2:])

    def complete(self) -> None:
        assert self.filler is not None
        self.filler.complete()

    def open_elements(self, k: int, elems: Iterable[int]) -> tuple:
        """A dispute's opening of tensor k's elements, fetching only their chunks."""
        assert self.filler is not None
        return self.filler.open_elements(k, elems)


@dataclass(frozen=True)
class FetchingDataset(_FetchingSplit, PackedDataset):
    """A classification split whose rows are fetched when a batch reads them (`prepare`, which
    the engines call with each step's example indices before the step reads X); its root is the
    manifest's, which every chunk fetched is checked against."""

    filler: ChunkFiller | None = None
    manifest_root: str = ""

    def prepare(self, indices: Iterable[int]) -> None:
        assert self.filler is not None
        self.filler.fill(self.filler.fetcher.chunks_for_examples(self.filler.split, indices))


@dataclass(frozen=True)
class FetchingTokens(_FetchingSplit, PackedTokens):
    """A token split whose windows fetch the chunks they cover first (the token engine reads
    batches through `windows` only)."""

    filler: ChunkFiller | None = None
    manifest_root: str = ""

    def windows(self, off: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
        assert self.filler is not None
        f = self.filler
        f.fill(f.fetcher.chunks_for_windows(f.split, off.reshape(-1).tolist(), context))
        return super().windows(off, context)


def step_indices(seed: int, steps: Iterable[int], batch: int, n: int) -> np.ndarray:
    """Every example the batches of these steps read (§4.1, one shard)."""
    return np.concatenate([batch_indices(seed, t, batch, n) for t in steps])


# -- opening a manifest by name or path ------------------------------------------------------


def _stores(urls: Iterable[str], timeout_s: float) -> list[BlobStore]:
    out = []
    for u in urls:
        try:
            out.append(open_blob_store(u, timeout_s=timeout_s))
        except ValueError as e:
            raise DatasetError(f"dataset store: {e}") from None
    return out


def open_packed(
    ref: str, cfg: FetchConfig = FetchConfig(), extra_stores: Sequence[BlobStore] = ()
) -> ChunkFetcher:
    """A fetcher for `manifest:0x<address>` (the manifest read from the stores) or a manifest
    file's path (its folder's `blobs/` store is tried first: what `dataset pack --out` wrote);
    `extra_stores` are tried after the configured ones (a role's own blob store and
    --spec-store list)."""
    urls = list(cfg.stores)
    if ref.startswith(packed.NAME_PREFIX):
        address = ref[len(packed.NAME_PREFIX) :].lower()
        stores = _stores(urls, cfg.timeout_s) + list(extra_stores)
        raw, why = None, []
        for store in stores:
            try:
                raw = store.get(address, max_bytes=MAX_MANIFEST_BYTES)
                break
            except (BlobError, ValueError, OSError) as e:
                why.append(str(e).splitlines()[0][:200])
        if raw is None:
            raise ChunkUnavailable(
                f"dataset manifest {address} is in none of the dataset stores"
                f" ({len(stores)}: {'; '.join(why) or 'none configured'})"
            )
    else:
        path = Path(ref)
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise DatasetError(f"cannot read dataset manifest {ref}: {e.strerror}") from None
        local = path.parent / "blobs"
        stores = _stores([str(local)] if local.is_dir() else [], cfg.timeout_s)
        stores += _stores(urls, cfg.timeout_s) + list(extra_stores)
    manifest = packed.manifest_from_bytes(raw)
    if cfg.max_dataset_bytes is not None and manifest.data_bytes() > cfg.max_dataset_bytes:
        mib = manifest.data_bytes() / 2**20
        raise DatasetError(f"dataset {ref[:120]}: {mib:.1f} MiB of data, over "
                           f"--max-dataset-mib {cfg.max_dataset_bytes >> 20}")  # fmt: skip
    cache = DiskCache(cfg.cache_dir, cfg.cache_bytes) if cfg.cache_dir else None
    return ChunkFetcher(manifest, stores, cache)


def is_packed_ref(name: str) -> bool:
    return name.startswith(packed.NAME_PREFIX)
