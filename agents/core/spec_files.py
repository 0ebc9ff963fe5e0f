"""Where a version-3 spec's blobs and its dataset's chunks are: recorded beside the spec.

`job build` writes the spec's blobs to `--blob-url` (default: the folder `<spec>.blobs`) and may
read a packed dataset's chunks from the manifest's own `blobs/` folder or `--data-store`. It
records where in `<spec>.sources.json`, so `train`, `job weights` and the submitter find them
without being told again: an explicit flag first, then the recorded places, then the defaults.
Local folders are recorded relative to the spec's folder (the pair may be moved together).

The data stores recorded here are plain URLs: a reader adds them to its own fetch settings
(agents/data/chunks.py `FetchConfig.with_stores`), after the ones it was given. This module reads
and writes files only, so every layer that opens a spec (the CLI, the submitter role) may use it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

SOURCES_SUFFIX = ".sources.json"


class SourcesError(ValueError):
    """A sources file that cannot be read: one line for the user."""


@dataclass(frozen=True)
class SpecSources:
    blob_url: str | None = None  # the store holding the bundle and S_0
    data_stores: tuple[str, ...] = ()  # stores holding the dataset's chunks


def sources_path(spec_path: str | Path) -> Path:
    return Path(spec_path).with_suffix(SOURCES_SUFFIX)


def default_blobs(spec_path: str | Path) -> str:
    """Where `job build` writes a spec's blobs unless told: the folder <spec>.blobs."""
    return str(Path(spec_path).with_suffix(".blobs"))


def _is_url(u: str) -> bool:
    return "://" in u


def _to_file(spec_path: Path, u: str) -> str:
    if _is_url(u):
        return u
    return os.path.relpath(Path(u).resolve(), spec_path.resolve().parent)


def _same_place(a: str, b: str) -> bool:
    return a == b or (not _is_url(a) and not _is_url(b) and Path(a).resolve() == Path(b).resolve())


def _from_file(spec_path: Path, u: str) -> str:
    if _is_url(u) or Path(u).is_absolute():
        return u
    return str((spec_path.parent / u).resolve())


def write_sources(
    spec_path: str | Path, blob_url: str, data_stores: tuple[str, ...]
) -> Path | None:
    """Record the spec's stores beside it, when they are not where a reader looks by default (a
    blob store other than <spec>.blobs, or any data store); otherwise remove an earlier record,
    which would name the stores of an earlier build of this spec file."""
    spec_path = Path(spec_path)
    out = sources_path(spec_path)
    if _same_place(blob_url, default_blobs(spec_path)) and not data_stores:
        out.unlink(missing_ok=True)
        return None
    obj = {
        "blob_url": _to_file(spec_path, blob_url),
        "data_stores": [_to_file(spec_path, u) for u in data_stores],
    }
    out.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    return out


def read_sources(spec_path: str | Path) -> SpecSources:
    """The recorded sources of a spec (none recorded: empty)."""
    spec_path = Path(spec_path)
    path = sources_path(spec_path)
    if not path.is_file():
        return SpecSources()
    try:
        obj = json.loads(path.read_text())
        blob = obj.get("blob_url")
        stores = obj.get("data_stores", [])
        if blob is not None and not isinstance(blob, str):
            raise TypeError("blob_url")
        if not isinstance(stores, list) or not all(isinstance(u, str) for u in stores):
            raise TypeError("data_stores")
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise SourcesError(f"cannot read {path}: {e}"[:300]) from None
    return SpecSources(
        None if blob is None else _from_file(spec_path, blob),
        tuple(_from_file(spec_path, u) for u in stores),
    )


def blob_url(spec_path: str | Path, given: str | None = None) -> str:
    """The spec's blob store: `given`, else the recorded one, else <spec>.blobs."""
    return given or read_sources(spec_path).blob_url or default_blobs(spec_path)


def data_stores(spec_path: str | Path) -> tuple[str, ...]:
    """The recorded stores of the spec's dataset chunks (tried after the configured ones)."""
    return read_sources(spec_path).data_stores
