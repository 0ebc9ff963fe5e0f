"""Packed user datasets (PROTOCOL §4.4): the manifest, its chunks and the chunk Merkle maths.

A packed dataset is a manifest (canonical JSON, format `vtp.dataset.v1`) plus chunk blobs. A
chunk is 2^h consecutive leaves of one tensor's Merkle tree (§3) — an aligned subtree — so its
subtree root is a node of the tensor's own tree: the data root, tensor root and dataset root of
a packed dataset are exactly those of the same arrays under a built-in name, and the chain's
one-step proofs (which open single elements against the dataset root) need no change. A chunk
blob is its elements as big-endian 32-bit words (the Merkle encoding, the last chunk unpadded);
its store address is keccak-256 of the blob, so every blob store the project has (folder,
HTTP, S3) holds chunks as they are; its subtree root is what binds it to the dataset root.

Splits: `--validation p/q` holds out, for classification, example i iff i mod q >= q - p
(interleaved: every class spread over both splits; 1/5 is sklearn-digits' i mod 5 == 4), and for
a token stream the tail: the first floor(L (q - p) / q) tokens train, the rest validate
(1/10 is shakespeare-char's cut).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from agents.data.builtin import DatasetError
from agents.training import merkle
from agents.training.keccak import keccak256

FORMAT = "vtp.dataset.v1"
NAME_PREFIX = "manifest:"  # a spec's dataset name for a packed dataset: manifest:0x<address>
KINDS = ("classification", "tokens")
# 256 leaves: a verifier's fetch unit. Batches draw examples at random over the whole set, so a
# replayed segment touches about one chunk per example: small chunks save verifiers bandwidth,
# large ones shrink the manifest (~140 bytes a chunk: 0.2% of the data at 64 KiB; see
# bench/results/data.json)
DEFAULT_CHUNK_BYTES = 1 << 16
MIN_CHUNK_BYTES = merkle.LEAF_BYTES
MAX_CHUNK_BYTES = 1 << 26
MAX_VALIDATION_DENOMINATOR = 1 << 16
MAX_VOCAB = 1 << 24
MAX_CLASSES = 1 << 24

Sink = Callable[[str, bytes], None]


# -- chunk trees ---------------------------------------------------------------------------


def zero_root(height: int) -> bytes:
    """Root of a subtree of 2^height padding leaves (bytes32(0) each), as §3 pads a tree."""
    h = merkle.ZERO32
    for _ in range(height):
        h = keccak256(h + h)
    return h


def chunk_leaves_for(numel: int, chunk_bytes: int) -> int:
    """Leaves per chunk of a tensor: the chunk size, or the whole (padded) tree if smaller."""
    n_leaves = -(-numel // merkle.LEAF_ELEMS)
    return min(chunk_bytes // merkle.LEAF_BYTES, 1 << merkle.depth_for(n_leaves))


def tree_of_words(w: np.ndarray, is_f32: bool, chunk_leaves: int) -> tuple[list[bytes], bytes]:
    """(chunk subtree roots, data root) of a tensor's words: one pass of the C tree hasher."""
    lv = merkle.levels(merkle.leaves(w, is_f32))
    height = chunk_leaves.bit_length() - 1
    n_leaves = -(-w.size // merkle.LEAF_ELEMS)
    level = lv[height]
    n_chunks = -(-n_leaves // chunk_leaves)
    return [level[i].tobytes() for i in range(n_chunks)], lv[-1][0].tobytes()


def _slots(chunk_leaves: int, numel: int) -> tuple[int, int, int]:
    """(height h of a chunk's subtree, levels above the chunks, chunk count) of a tensor."""
    n_leaves = -(-numel // merkle.LEAF_ELEMS)
    height = chunk_leaves.bit_length() - 1
    return height, merkle.depth_for(n_leaves) - height, -(-n_leaves // chunk_leaves)


def _up(cur: list[bytes], pad: bytes) -> list[bytes]:
    """One level up; an odd last node pairs with the all-padding subtree of its height. The
    padding is never materialised: a (hostile) manifest's claimed size costs nothing."""
    if len(cur) % 2:
        cur = [*cur, pad]
    return [keccak256(cur[i] + cur[i + 1]) for i in range(0, len(cur), 2)]


def fold_chunk_roots(roots: list[bytes], chunk_leaves: int, numel: int) -> bytes:
    """The data root from every chunk's subtree root: the tree above the chunks, padded with
    all-padding subtrees (zero_root), exactly as the full tree is padded."""
    height, above, count = _slots(chunk_leaves, numel)
    if len(roots) != count:
        raise DatasetError(f"{len(roots)} chunk roots do not cover {numel} elements")
    cur, pad = list(roots), zero_root(height)
    for _ in range(above):
        cur, pad = _up(cur, pad), keccak256(pad + pad)
    return cur[0]


def chunk_proof(roots: list[bytes], index: int, chunk_leaves: int, numel: int) -> list[bytes]:
    """Sibling hashes (bottom-up) opening chunk `index` against the data root: log2(#chunk
    slots) hashes, what a party holding only the dataset root needs beside the chunk."""
    height, above, _ = _slots(chunk_leaves, numel)
    cur, pad, sib, idx = list(roots), zero_root(height), [], index
    for _ in range(above):
        sib.append(cur[idx ^ 1] if idx ^ 1 < len(cur) else pad)
        cur, pad, idx = _up(cur, pad), keccak256(pad + pad), idx // 2
    return sib


def verify_chunk_proof(droot: bytes, sub_root: bytes, index: int, siblings: list[bytes]) -> bool:
    h, idx = sub_root, index
    for s in siblings:
        h = keccak256(s + h) if idx & 1 else keccak256(h + s)
        idx //= 2
    return idx == 0 and h == droot


def blob_words(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=">u4").astype(np.uint32)


def chunk_root_of_blob(blob: bytes, is_f32: bool, chunk_leaves: int) -> bytes:
    """Subtree root of a chunk blob: its leaves, padded with zero leaves to the chunk width."""
    leaf_hashes = merkle.leaves(blob_words(blob), is_f32)
    padded = np.zeros((chunk_leaves, 32), dtype=np.uint8)
    padded[: leaf_hashes.shape[0]] = leaf_hashes
    return merkle.root_of_leaves(padded)


def element_proof_from_chunk(t: TensorEntry, i: int, words: np.ndarray,
                             element: int) -> merkle.ElementProof:  # fmt: skip
    """The §3 element proof of `element` (what the one-step proof of the batch gather opens
    against the dataset root) from chunk i's words and the manifest alone: the siblings inside
    the chunk's subtree, then the chunk's siblings above it. No other chunk is needed."""
    return element_proofs_from_chunk(t, i, words, [element])[0]


def element_proofs_from_chunk(t: TensorEntry, i: int, words: np.ndarray,
                              elements: list[int]) -> list[merkle.ElementProof]:  # fmt: skip
    """element_proof_from_chunk of several elements of chunk i: the chunk's tree and its path
    above are hashed once (a dispute opens a row's leaves, often in one chunk)."""
    first, end = t.chunk_span(i)
    for element in elements:
        if not first <= element < end:
            raise IndexError(f"element {element} is not in chunk {i} ([{first}, {end}))")
    padded = np.zeros((t.chunk_leaves, 32), dtype=np.uint8)
    lh = merkle.leaves(np.ascontiguousarray(words, dtype=np.uint32), t.is_f32)
    padded[: lh.shape[0]] = lh
    levels = merkle.levels(padded)[:-1]
    roots = [bytes.fromhex(c.root[2:]) for c in t.chunks]
    above = chunk_proof(roots, i, t.chunk_leaves, t.numel)
    out = []
    for element in elements:
        local = (element - first) // merkle.LEAF_ELEMS
        sib, idx = [], local
        for level in levels:
            sib.append(level[idx ^ 1].tobytes())
            idx //= 2
        lo = local * merkle.LEAF_ELEMS
        chunk = merkle.encode_chunk(words[lo : lo + merkle.LEAF_ELEMS], t.is_f32)
        out.append(merkle.ElementProof(element // merkle.LEAF_ELEMS, chunk, sib + above))
    return out


# -- the manifest --------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkRef:
    root: str  # "0x" + hex: the chunk's subtree root
    address: str  # "0x" + hex: keccak-256 of the chunk blob (its blob-store address)


@dataclass(frozen=True)
class TensorEntry:
    name: str  # "x", "y" (classification) or "tokens"
    dtype: int  # merkle.DTYPE_F32 | merkle.DTYPE_U32
    rows: int
    cols: int
    data_root: str
    chunk_leaves: int
    chunks: tuple[ChunkRef, ...]

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    @property
    def is_f32(self) -> bool:
        return self.dtype == merkle.DTYPE_F32

    def chunk_span(self, i: int) -> tuple[int, int]:
        """[first, end) element range of chunk i."""
        per = self.chunk_leaves * merkle.LEAF_ELEMS
        return i * per, min((i + 1) * per, self.numel)

    def tensor_root(self) -> bytes:
        droot = bytes.fromhex(self.data_root[2:])
        return merkle.tensor_root_from(self.dtype, self.rows, self.cols, droot)

    def to_obj(self) -> dict:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "rows": self.rows,
            "cols": self.cols,
            "data_root": self.data_root,
            "chunk_leaves": self.chunk_leaves,
            "chunks": [[c.root, c.address] for c in self.chunks],
        }


@dataclass(frozen=True)
class SplitEntry:
    name: str  # "train" | "validation"
    n: int  # examples (classification) or tokens
    root: str  # the dataset root (§4.2 / §4.3) a spec carries
    tensors: tuple[TensorEntry, ...]

    def tensor(self, name: str) -> TensorEntry:
        return next(t for t in self.tensors if t.name == name)

    def to_obj(self) -> dict:
        return {
            "n": self.n,
            "root": self.root,
            "tensors": [t.to_obj() for t in self.tensors],
        }


@dataclass(frozen=True)
class Manifest:
    kind: str  # "classification" | "tokens"
    item_shape: tuple[int, ...]  # one example's shape (classification); () for tokens
    classes: int  # classes, or the vocabulary size
    validation: tuple[int, int]  # (p, q): the held-out share p/q
    chunk_bytes: int
    splits: tuple[SplitEntry, ...]  # train first, then validation if p > 0

    @property
    def root(self) -> str:
        """The training split's dataset root: what a job spec on this dataset carries."""
        return self.splits[0].root

    def split(self, name: str) -> SplitEntry | None:
        return next((s for s in self.splits if s.name == name), None)

    def data_bytes(self) -> int:
        """Bytes of every split's elements (what materialising the whole dataset holds)."""
        return sum(4 * t.numel for s in self.splits for t in s.tensors)

    def to_obj(self) -> dict:
        return {
            "format": FORMAT,
            "kind": self.kind,
            "item_shape": list(self.item_shape),
            ("classes" if self.kind == "classification" else "vocab"): self.classes,
            "split": {
                "rule": "interleaved" if self.kind == "classification" else "tail",
                "validation": list(self.validation),
            },
            "chunk_bytes": self.chunk_bytes,
            "root": self.root,
            "splits": {s.name: s.to_obj() for s in self.splits},
        }

    def canonical_bytes(self) -> bytes:
        return json.dumps(self.to_obj(), sort_keys=True, separators=(",", ":")).encode("ascii")

    def address(self) -> str:
        return "0x" + keccak256(self.canonical_bytes()).hex()

    def name(self) -> str:
        return NAME_PREFIX + self.address()


def _hex32(v, where: str) -> str:
    if not isinstance(v, str) or len(v) != 66 or not v.startswith("0x"):
        raise DatasetError(f"dataset manifest: {where} must be 0x + 64 hex digits")
    try:
        bytes.fromhex(v[2:])
    except ValueError:
        raise DatasetError(f"dataset manifest: {where} must be 0x + 64 hex digits") from None
    return v.lower()


def _pos_int(v, where: str, lo: int = 1, hi: int = 1 << 40) -> int:
    """An int in [lo, hi] (rows x cols < 2^80): parsing a manifest never allocates by a size it
    claims (see _up); what it claims is checked against its chunk list."""
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise DatasetError(f"dataset manifest: {where} must be an integer in [{lo}, {hi}]")
    return v


def manifest_from_bytes(raw: bytes) -> Manifest:
    """Parse and check a manifest: every field's type and range, every chunk list's roots fold
    to its tensor's data root, every split's tensor roots give its dataset root. What is left to
    check is each chunk blob against its subtree root (chunks.py, on fetch)."""
    try:
        o = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise DatasetError(f"dataset manifest is not JSON: {e}"[:300]) from None
    if not isinstance(o, dict) or o.get("format") != FORMAT:
        raise DatasetError(f"dataset manifest: format must be {FORMAT!r}")
    kind = o.get("kind")
    if kind not in KINDS:
        raise DatasetError(f"dataset manifest: kind must be one of {', '.join(KINDS)}")
    classes = _pos_int(o.get("classes" if kind == "classification" else "vocab"), "classes", 1,
                       MAX_CLASSES)  # fmt: skip
    shape = o.get("item_shape")
    if not isinstance(shape, list):
        raise DatasetError("dataset manifest: item_shape must be a list")
    item = tuple(_pos_int(d, "item_shape", 1, 1 << 24) for d in shape)
    split = o.get("split") or {}
    rule = "interleaved" if kind == "classification" else "tail"
    if not isinstance(split, dict) or split.get("rule") != rule:
        raise DatasetError(f"dataset manifest: split.rule of a {kind} dataset is {rule!r}")
    val = split.get("validation")
    if not (isinstance(val, list) and len(val) == 2):
        raise DatasetError("dataset manifest: split.validation must be [p, q]")
    q = _pos_int(val[1], "split.validation q", 1, MAX_VALIDATION_DENOMINATOR)
    p = _pos_int(val[0], "split.validation p", 0, q - 1)
    chunk_bytes = _pos_int(o.get("chunk_bytes"), "chunk_bytes", MIN_CHUNK_BYTES, MAX_CHUNK_BYTES)
    if chunk_bytes & (chunk_bytes - 1):
        raise DatasetError("dataset manifest: chunk_bytes must be a power of two")
    raw_splits = o.get("splits")
    want = ["train", "validation"] if p else ["train"]
    if not isinstance(raw_splits, dict) or sorted(raw_splits) != sorted(want):
        raise DatasetError(f"dataset manifest: splits must be {', '.join(want)}")
    splits = tuple(_split(name, raw_splits[name], kind, chunk_bytes) for name in want)
    m = Manifest(kind, item, classes, (p, q), chunk_bytes, splits)
    if _hex32(o.get("root"), "root") != m.root:
        raise DatasetError("dataset manifest: root is not the training split's root")
    return m


def _split(name: str, o, kind: str, chunk_bytes: int) -> SplitEntry:
    if not isinstance(o, dict) or not isinstance(o.get("tensors"), list):
        raise DatasetError(f"dataset manifest: splits.{name} must hold tensors")
    n = _pos_int(o.get("n"), f"splits.{name}.n")
    names = ["x", "y"] if kind == "classification" else ["tokens"]
    tensors = tuple(_tensor(f"splits.{name}", t, chunk_bytes) for t in o["tensors"])
    if [t.name for t in tensors] != names:
        raise DatasetError(f"dataset manifest: splits.{name} tensors must be {names}")
    for t in tensors:
        want = (merkle.DTYPE_F32 if t.name == "x" else merkle.DTYPE_U32,
                n if t.name == "x" else 1, t.cols if t.name == "x" else n)  # fmt: skip
        if (t.dtype, t.rows, t.cols) != want:
            raise DatasetError(f"dataset manifest: splits.{name}.{t.name} has the wrong shape")
    root = merkle.root_list(merkle.DATASET_DOMAIN, [t.tensor_root() for t in tensors])
    if _hex32(o.get("root"), f"splits.{name}.root") != "0x" + root.hex():
        raise DatasetError(f"dataset manifest: splits.{name}.root is not its tensors' root")
    return SplitEntry(name, n, "0x" + root.hex(), tensors)


def _tensor(where: str, o, chunk_bytes: int) -> TensorEntry:
    if not isinstance(o, dict) or not isinstance(o.get("chunks"), list):
        raise DatasetError(f"dataset manifest: {where} has a malformed tensor")
    name = o.get("name")
    where = f"{where}.{name}"
    dtype = _pos_int(o.get("dtype"), f"{where}.dtype", 1, 2)
    rows, cols = _pos_int(o.get("rows"), f"{where}.rows"), _pos_int(o.get("cols"), f"{where}.cols")
    cl = _pos_int(o.get("chunk_leaves"), f"{where}.chunk_leaves")
    if cl != chunk_leaves_for(rows * cols, chunk_bytes):
        raise DatasetError(f"dataset manifest: {where}.chunk_leaves does not match chunk_bytes")
    chunks = []
    for c in o["chunks"]:
        if not (isinstance(c, list) and len(c) == 2):
            raise DatasetError(f"dataset manifest: {where}.chunks entries are [root, address]")
        chunks.append(ChunkRef(_hex32(c[0], f"{where} chunk root"), _hex32(c[1], f"{where} chunk")))
    droot = _hex32(o.get("data_root"), f"{where}.data_root")
    folded = fold_chunk_roots([bytes.fromhex(c.root[2:]) for c in chunks], cl, rows * cols)
    if "0x" + folded.hex() != droot:
        raise DatasetError(f"dataset manifest: {where}'s chunk roots do not give its data root")
    return TensorEntry(str(name), dtype, rows, cols, droot, cl, tuple(chunks))


# -- packing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackConfig:
    validation: Fraction = Fraction(1, 10)
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    max_bytes: int = 8 << 30  # --max-dataset-mib


def parse_validation(text: str) -> Fraction:
    try:
        f = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise DatasetError(f"--validation must be a share like 0.1 or 1/5, got {text!r}") from None
    if not 0 <= f < 1:
        raise DatasetError(f"--validation must be in [0, 1), got {text}")
    if f.denominator > MAX_VALIDATION_DENOMINATOR:
        raise DatasetError(f"--validation {text}: denominator over {MAX_VALIDATION_DENOMINATOR}")
    return f


def classification_split(n: int, share: Fraction) -> np.ndarray:
    """Boolean mask of validation examples: i mod q >= q - p."""
    p, q = share.numerator, share.denominator
    return (np.arange(n) % q) >= q - p if p else np.zeros(n, dtype=bool)


def token_cut(n: int, share: Fraction) -> int:
    """Tokens [0, cut) train, [cut, n) validate."""
    return n * (share.denominator - share.numerator) // share.denominator


def check_classification(x: np.ndarray, y: np.ndarray, classes: int | None, where_x: str,
                         where_y: str) -> int:  # fmt: skip
    """Refuse what cannot be packed, naming the file; returns the number of classes."""
    if x.dtype != np.float32:
        raise DatasetError(f"{where_x}: features must be float32, got {x.dtype} (convert it "
                           "yourself if that rounding is what you want)")  # fmt: skip
    if x.ndim < 2 or x.shape[0] == 0 or int(np.prod(x.shape[1:])) == 0:
        raise DatasetError(f"{where_x}: features must be N x F (N, F >= 1), got shape {x.shape}")
    flat = x.reshape(x.shape[0], -1)
    if not np.isfinite(flat).all():
        bad = ~np.isfinite(flat)
        row = int(np.argmax(bad.any(axis=1)))
        raise DatasetError(f"{where_x}: {int(bad.sum())} NaN or infinite features "
                           f"(first in example {row})")  # fmt: skip
    if y.dtype.kind not in "iu":
        raise DatasetError(f"{where_y}: labels must be integers, got {y.dtype}")
    if y.ndim != 1:
        raise DatasetError(f"{where_y}: labels must be one-dimensional, got shape {y.shape}")
    if y.shape[0] != x.shape[0]:
        raise DatasetError(f"{where_y}: {y.shape[0]} labels for {x.shape[0]} examples in "
                           f"{where_x}")  # fmt: skip
    if int(y.min()) < 0:
        raise DatasetError(f"{where_y}: negative label {int(y.min())}")
    top = int(y.max())
    if classes is None:
        classes = top + 1
    if not 2 <= classes <= MAX_CLASSES:
        raise DatasetError(f"{where_y}: classes must be in [2, {MAX_CLASSES}], got {classes}")
    if top >= classes:
        raise DatasetError(f"{where_y}: label {top} (example {int(np.argmax(y))}) is not below "
                           f"--classes {classes}")  # fmt: skip
    return classes


def check_tokens(t: np.ndarray, vocab: int, where: str) -> None:
    if t.dtype.kind not in "iu":
        raise DatasetError(f"{where}: tokens must be integers, got {t.dtype}")
    if t.ndim != 1:
        raise DatasetError(f"{where}: tokens must be one stream (1-D), got shape {t.shape}")
    if not 2 <= vocab <= MAX_VOCAB:
        raise DatasetError(f"{where}: --vocab must be in [2, {MAX_VOCAB}], got {vocab}")
    if t.size == 0:
        raise DatasetError(f"{where}: no tokens")
    lo, hi = int(t.min()), int(t.max())
    if lo < 0:
        raise DatasetError(f"{where}: negative token {lo}")
    if hi >= vocab:
        raise DatasetError(f"{where}: token {hi} (position {int(np.argmax(t))}) is not below "
                           f"--vocab {vocab}")  # fmt: skip


def _check_size(nbytes: int, cfg: PackConfig, where: str) -> None:
    if nbytes > cfg.max_bytes:
        raise DatasetError(f"{where}: {nbytes / 2**20:.1f} MiB of data, over --max-dataset-mib "
                           f"{cfg.max_bytes >> 20}")  # fmt: skip


def _check_split(name: str, n: int, least: int, where: str, what: str) -> None:
    if n < least:
        raise DatasetError(f"{where}: the {name} split has {n} {what} (at least {least} needed; "
                           "change --validation)")  # fmt: skip


def _pack_tensor(name: str, a: np.ndarray, cfg: PackConfig, sink: Sink) -> TensorEntry:
    """Commit one 2-D tensor and hand its chunk blobs to `sink` (address, bytes)."""
    w, code, rows, cols = merkle.words(a)
    is_f32 = code == merkle.DTYPE_F32
    cl = chunk_leaves_for(w.size, cfg.chunk_bytes)
    roots, droot = tree_of_words(w, is_f32, cl)
    per = cl * merkle.LEAF_ELEMS
    refs = []
    for i, r in enumerate(roots):
        # chunk by chunk: the byte swap and the address hash run on cache-hot memory
        blob = w[i * per : (i + 1) * per].astype(">u4").tobytes()
        address = "0x" + keccak256(blob).hex()
        sink(address, blob)
        refs.append(ChunkRef("0x" + r.hex(), address))
    return TensorEntry(name, code, rows, cols, "0x" + droot.hex(), cl, tuple(refs))


def _split_entry(name: str, tensors: list[TensorEntry], n: int) -> SplitEntry:
    root = merkle.root_list(merkle.DATASET_DOMAIN, [t.tensor_root() for t in tensors])
    return SplitEntry(name, n, "0x" + root.hex(), tuple(tensors))


def check_chunk_bytes(chunk_bytes: int) -> None:
    ok = MIN_CHUNK_BYTES <= chunk_bytes <= MAX_CHUNK_BYTES
    if not ok or chunk_bytes & (chunk_bytes - 1):
        raise DatasetError(f"--chunk-bytes must be a power of two in [{MIN_CHUNK_BYTES}, "
                           f"{MAX_CHUNK_BYTES}], got {chunk_bytes}")  # fmt: skip


def plan_classification(x: np.ndarray, y: np.ndarray, classes: int | None, cfg: PackConfig,
                        where_x: str = "features", where_y: str = "labels") -> int:  # fmt: skip
    """Every check a classification pack makes, before anything is hashed or written."""
    check_chunk_bytes(cfg.chunk_bytes)
    classes = check_classification(x, y, classes, where_x, where_y)
    _check_size(x.size * 4 + y.size * 4, cfg, where_x)
    held = classification_split(x.shape[0], cfg.validation)
    _check_split("train", int((~held).sum()), 1, where_x, "examples")
    if cfg.validation:
        _check_split("validation", int(held.sum()), 1, where_x, "examples")
    return classes


def pack_classification(x: np.ndarray, y: np.ndarray, classes: int | None, cfg: PackConfig,
                        sink: Sink, where_x: str = "features",
                        where_y: str = "labels") -> Manifest:  # fmt: skip
    classes = plan_classification(x, y, classes, cfg, where_x, where_y)
    flat = x.reshape(x.shape[0], -1)
    held = classification_split(x.shape[0], cfg.validation)
    splits = []
    for name, sel in (("train", ~held), ("validation", held)):
        if name == "validation" and not cfg.validation:
            continue
        xs = flat if sel.all() else np.ascontiguousarray(flat[sel])  # no copy when all train
        ys = y[sel].astype(np.int64).reshape(1, -1)
        tensors = [_pack_tensor("x", xs, cfg, sink), _pack_tensor("y", ys, cfg, sink)]
        splits.append(_split_entry(name, tensors, xs.shape[0]))
    share = (cfg.validation.numerator, cfg.validation.denominator)
    return Manifest("classification", tuple(x.shape[1:]), classes, share, cfg.chunk_bytes,
                    tuple(splits))  # fmt: skip


def plan_tokens(t: np.ndarray, vocab: int, cfg: PackConfig, where: str = "tokens") -> None:
    check_chunk_bytes(cfg.chunk_bytes)
    check_tokens(t, vocab, where)
    _check_size(t.size * 4, cfg, where)
    cut = token_cut(t.size, cfg.validation)
    # a split with one token has no (input, target) pair at all
    _check_split("train", cut, 2, where, "tokens")
    if cfg.validation:
        _check_split("validation", t.size - cut, 2, where, "tokens")


def pack_tokens(t: np.ndarray, vocab: int, cfg: PackConfig, sink: Sink,
                where: str = "tokens") -> Manifest:  # fmt: skip
    plan_tokens(t, vocab, cfg, where)
    cut = token_cut(t.size, cfg.validation)
    splits = []
    for name, part in (("train", t[:cut]), ("validation", t[cut:])):
        if name == "validation" and not cfg.validation:
            continue
        tensors = [_pack_tensor("tokens", part.astype(np.int64).reshape(1, -1), cfg, sink)]
        splits.append(_split_entry(name, tensors, part.size))
    share = (cfg.validation.numerator, cfg.validation.denominator)
    return Manifest("tokens", (), vocab, share, cfg.chunk_bytes, tuple(splits))
