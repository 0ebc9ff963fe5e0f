"""`python -m agents dataset pack|check`: bring your own data as a packed, Merkle-committed
dataset, and check that a published one is whole.

Reads features + labels (classification) or a token stream from `.npy`, `.npz` (`FILE.npz:NAME`,
or the archive's only array) or safetensors (`FILE.safetensors:NAME`), checks them, and writes
`--out DIR`: `manifest.json` (the manifest's canonical bytes: its keccak-256 is its address) and
`blobs/` (a blob-store folder holding every chunk and the manifest). Every check runs before
anything is written; the folder appears whole (written beside it, then renamed) or not at all.
`--blob-url` then publishes the same blobs to a store (folder, http(s)://, s3://). A job spec
names the dataset `manifest:0x<address>` with the training split's root (PROTOCOL §4.4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from agents.cli.errors import UserError
from agents.cli.options import add_options, build
from agents.data.chunks import FetchConfig

DEFAULT_MAX_DATASET_MIB = 8192


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dataset", help="pack your own data into a chunked, committed dataset")
    dsub = p.add_subparsers(dest="dataset_command", required=True, metavar="DATASET_COMMAND")
    b = dsub.add_parser("pack", help="write a dataset manifest and its chunk blobs")
    b.add_argument("--features", help="float32 N x ... features (.npy, FILE.npz:NAME, ...)")
    b.add_argument("--labels", help="integer labels, one per example")
    b.add_argument("--classes", type=int, help="number of classes (default: largest label + 1)")
    b.add_argument("--tokens", help="an integer token stream (1-D)")
    b.add_argument("--vocab", type=int, help="vocabulary size: every token is below it")
    b.add_argument("--validation", default="0.1", help="held-out share, e.g. 0.1 or 1/5 (0: none)")
    b.add_argument("--chunk-bytes", type=int, help="chunk size, a power of two (default 64 KiB)")
    b.add_argument("--max-dataset-mib", type=int, default=DEFAULT_MAX_DATASET_MIB)
    b.add_argument("--out", required=True, help="the folder to write (must not exist or be empty)")
    b.add_argument("--blob-url", help="also publish the manifest and chunks to this blob store")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=run_pack)
    c = dsub.add_parser("check", help="fetch every chunk of a packed dataset and check it")
    c.add_argument("--dataset", required=True, help="manifest:0x<address> or a manifest.json")
    add_options(c, FetchConfig)  # the stores to read from, tried in order
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=run_check)


def load_array(ref: str, flag: str):
    """The array a --features/--labels/--tokens argument names; UserError naming the file."""
    import numpy as np

    path, sep, key = ref.rpartition(":")
    if not sep or not path.endswith((".npz", ".safetensors")):
        path, key = ref, ""
    if not Path(path).is_file():
        raise UserError(f"{flag} {path}: no such file")
    try:
        if path.endswith(".safetensors"):
            from safetensors.numpy import load_file

            arrays = load_file(path)
        elif path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        else:
            arrays = {"": np.load(path, allow_pickle=False)}
    except ValueError as e:
        if "allow_pickle" in str(e) or "object" in str(e).lower():
            raise UserError(f"{flag} {path}: a ragged or object array (every example must have "
                            "the same shape and a numeric dtype)") from None  # fmt: skip
        raise UserError(f"{flag} {path}: cannot read it: {e}"[:300]) from None
    except Exception as e:  # the user's file: any reader error is theirs, in one line
        raise UserError(f"{flag} {path}: cannot read it: {type(e).__name__}: {e}"[:300]) from None
    if key:
        if key not in arrays:
            raise UserError(f"{flag} {path}: no array {key!r} (has {', '.join(sorted(arrays))})")
        return arrays[key], f"{path}:{key}"
    if len(arrays) != 1:
        raise UserError(f"{flag} {path} holds {len(arrays)} arrays: name one as {path}:NAME "
                        f"({', '.join(sorted(arrays))})")  # fmt: skip
    return next(iter(arrays.values())), path


def run_check(args: argparse.Namespace) -> int:
    """What a data owner runs after publishing: every chunk of every split is fetched from the
    stores and checked, and the roots are recomputed; exit 2 if any chunk is unavailable."""
    from agents.data import chunks

    t0 = time.perf_counter()
    fetcher = chunks.open_packed(args.dataset, build(FetchConfig, args))
    m = fetcher.manifest
    roots = {}
    for s in m.splits:
        ds = fetcher.load(s.name)  # ChunkUnavailable (exit 2) names the first missing chunk
        roots[s.name] = "0x" + ds.root().hex()
        if roots[s.name] != s.root:  # unreachable unless the checks above are broken
            raise UserError(f"{args.dataset}: the {s.name} split's root is {roots[s.name]}, "
                            f"its manifest says {s.root}")  # fmt: skip
    st = fetcher.stats
    out = {"root": m.root, "name": m.name(), "splits": roots, "chunks": st.chunks,
           "bytes": st.bytes, "rejected": st.rejected,
           "seconds": round(time.perf_counter() - t0, 3)}  # fmt: skip
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"ok: {m.name()}  root={m.root}  {st.chunks} chunks checked"
            + (f"  ({len(st.rejected)} bad or missing copies skipped)" if st.rejected else "")
        )
    return 0


def run_pack(args: argparse.Namespace) -> int:
    from agents.core.blobs import BlobError, LocalDirBackend, open_blob_store
    from agents.data import packed

    t0 = time.perf_counter()
    classify = args.features is not None or args.labels is not None
    if classify == (args.tokens is not None):
        raise UserError("give --features and --labels (classification) or --tokens (a stream)")
    if classify and (args.features is None or args.labels is None):
        raise UserError("classification needs both --features and --labels")
    if classify and args.vocab is not None or not classify and args.classes is not None:
        raise UserError("--classes goes with --features/--labels, --vocab with --tokens")
    if not classify and args.vocab is None:
        raise UserError("--tokens needs --vocab V (every token is below V)")
    if args.max_dataset_mib < 1:
        raise UserError(f"--max-dataset-mib must be >= 1, got {args.max_dataset_mib}")
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out} exists and is not an empty folder")
    chunk_bytes = packed.DEFAULT_CHUNK_BYTES if args.chunk_bytes is None else args.chunk_bytes
    cfg = packed.PackConfig(packed.parse_validation(args.validation), chunk_bytes,
                            args.max_dataset_mib << 20)  # fmt: skip
    # every check before anything is written
    if classify:
        x, wx = load_array(args.features, "--features")
        y, wy = load_array(args.labels, "--labels")
        packed.plan_classification(x, y, args.classes, cfg, wx, wy)
    else:
        t, wt = load_array(args.tokens, "--tokens")
        packed.plan_tokens(t, args.vocab, cfg, wt)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        local = LocalDirBackend(tmp / "blobs")
        nbytes = 0

        def sink(address: str, blob: bytes) -> None:
            nonlocal nbytes
            local.write(address, blob)
            nbytes += len(blob)

        if classify:
            m = packed.pack_classification(x, y, args.classes, cfg, sink, wx, wy)
        else:
            m = packed.pack_tokens(t, args.vocab, cfg, sink, wt)
        raw = m.canonical_bytes()
        local.write(m.address(), raw)
        (tmp / "manifest.json").write_bytes(raw)
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    pack_s = time.perf_counter() - t0
    if args.blob_url:
        try:
            store = open_blob_store(args.blob_url)
            src = LocalDirBackend(out / "blobs")
            for t_ in (e for s in m.splits for e in s.tensors):
                for c in t_.chunks:
                    store.backend.write(c.address, src.read(c.address))
            store.backend.write(m.address(), raw)
        except (BlobError, ValueError, OSError) as e:
            raise UserError(f"--blob-url {args.blob_url}: publishing failed ({out} is complete; "
                            f"run again to retry): {e}"[:400]) from None  # fmt: skip
    result = {
        "root": m.root,
        "manifest": str(out / "manifest.json"),
        "name": m.name(),
        "kind": m.kind,
        "splits": {s.name: s.n for s in m.splits},
        "chunks": sum(len(e.chunks) for s in m.splits for e in s.tensors),
        "bytes": nbytes,
        "seconds": round(pack_s, 3),
    }
    if args.blob_url:
        result["blob_url"] = args.blob_url
    if args.json:
        print(json.dumps(result))
    else:
        print(f"root={m.root}  manifest={result['manifest']}  name={m.name()}")
    return 0
