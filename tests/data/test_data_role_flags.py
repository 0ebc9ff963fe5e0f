"""The role agents' packed-dataset flags (issue #26, docs/OPERATORS.md): `--data-store URL`
(repeatable, tried in order before the role's own blob store and its --spec-stores),
`--data-cache DIR`, `--data-cache-mib N` and `--max-dataset-mib N`, each else its VTP_DATASET_*
variable; a bad value is one line and exit 2 before the role touches the chain. The flags fill
the role config's `fetch` (agents/cli/options.py), which the role hands down to every dataset it
opens."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "roles"))

from test_roles_bad_input import MANAGER, agents_cli, one_line_error  # noqa: E402

from agents.cli.main import build_parser  # noqa: E402
from agents.cli.options import build  # noqa: E402
from agents.core.blobs import open_blob_store  # noqa: E402
from agents.core.config import ConfigError  # noqa: E402
from agents.data import chunks, packed  # noqa: E402
from agents.roles.config import (  # noqa: E402
    NodeConfig,
    SolverConfig,
    VerifierConfig,
    WhistleblowerConfig,  # noqa: E402
)

ROLES = ("solver", "verifier", "whistleblower", "node")
CONFIGS = {"solver": SolverConfig, "verifier": VerifierConfig,
           "whistleblower": WhistleblowerConfig, "node": NodeConfig}  # fmt: skip
KEY = ("--key", "dev:1", "--data-dir", "unused")
ENV = ("VTP_DATASET_STORES", "VTP_DATASET_CACHE", "VTP_DATASET_CACHE_MIB", "VTP_MAX_DATASET_MIB")


def _args(role: str, *flags: str) -> argparse.Namespace:
    return build_parser().parse_args([role, *(["status"] if role == "node" else []), *KEY, *flags])


def fetch_of(role: str, *flags: str) -> chunks.FetchConfig:
    """Where the role's process fetches packed datasets from, as its config says."""
    return build(CONFIGS[role], _args(role, *flags)).fetch


@pytest.fixture
def no_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("role", ROLES)
def test_each_roles_flags_set_where_it_fetches_chunks_from(role, tmp_path, no_env):
    cache = tmp_path / "cache"
    got = fetch_of(role, "--data-store", "s3://bucket", "--data-store", str(tmp_path / "a"),
                   "--data-cache", str(cache), "--data-cache-mib", "7",
                   "--max-dataset-mib", "9")  # fmt: skip
    assert got == chunks.FetchConfig(
        ("s3://bucket", str(tmp_path / "a")), str(cache), 7 << 20, max_dataset_bytes=9 << 20
    )
    assert cache.is_dir()


def test_the_environment_is_the_default_and_a_flag_overrides_it(tmp_path, no_env):
    no_env.setenv("VTP_DATASET_STORES", f"{tmp_path / 'e1'},http://mirror:8080")
    no_env.setenv("VTP_DATASET_CACHE", str(tmp_path / "ecache"))
    no_env.setenv("VTP_DATASET_CACHE_MIB", "5")
    no_env.setenv("VTP_MAX_DATASET_MIB", "6")
    env = chunks.FetchConfig((str(tmp_path / "e1"), "http://mirror:8080"), str(tmp_path / "ecache"),
                             5 << 20, max_dataset_bytes=6 << 20)  # fmt: skip
    assert fetch_of("verifier") == env
    assert fetch_of("verifier", "--data-store", "s3://b", "--data-cache-mib", "3") == (
        chunks.FetchConfig(("s3://b",), str(tmp_path / "ecache"), 3 << 20,
                           max_dataset_bytes=6 << 20)
    )  # fmt: skip
    for name in ENV:
        no_env.delenv(name)
    assert fetch_of("solver") == chunks.FetchConfig()  # no store, no cache, no limit


def test_data_stores_come_before_the_roles_own_stores(tmp_path, no_env, capsys):
    """The manifest and every chunk are asked of the --data-store list first, in order, then of
    the stores the role adds (its blob store, each --spec-store)."""
    from agents.__main__ import main

    x = np.random.default_rng(1).standard_normal((40, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.arange(40) % 3)
    good = tmp_path / "published"
    assert main(["dataset", "pack", "--features", str(tmp_path / "x.npy"), "--labels",
                 str(tmp_path / "y.npy"), "--validation", "0", "--out", str(tmp_path / "ds"),
                 "--blob-url", str(good)]) == 0  # fmt: skip
    m = packed.manifest_from_bytes((tmp_path / "ds" / "manifest.json").read_bytes())
    fetch = fetch_of("solver", "--data-store", str(tmp_path / "empty"), "--data-store", str(good))
    own = open_blob_store(str(tmp_path / "own"))
    fetcher = chunks.open_packed(m.name(), fetch, extra_stores=[own])
    roots = [str(s.backend.root) for s in fetcher.stores]
    assert roots == [str(tmp_path / "empty"), str(good), str(tmp_path / "own")]
    split = fetcher.open_split()
    split.prepare([0])
    assert fetcher.stats.chunks == 2 and len(fetcher.stats.rejected) == 2  # empty, then good


BAD = {
    "solver": (("--data-cache-mib", "0"),
               "error: data_cache_mib (--data-cache-mib='0'): expected a whole number of MiB >= 1"),
    "verifier": (("--data-store", "ftp://host/x"),
                 "error: data_store (--data-store='ftp://host/x'): blob URL 'ftp://host/x'"),
    "whistleblower": (("--max-dataset-mib", "-2"), "error: max_dataset_mib (--max-dataset-mib="),
    "node": (("--data-cache", "FILE"), "error: data_cache (--data-cache="),
}  # fmt: skip


@pytest.mark.parametrize("role", ROLES)
def test_a_bad_data_flag_is_one_line_and_exit_2(role, tmp_path):
    flags, message = BAD[role]
    (tmp_path / "file").write_text("not a folder")
    flags = tuple(str(tmp_path / "file" / "sub") if f == "FILE" else f for f in flags)
    action = ("status",) if role == "node" else ()
    proc = agents_cli(
        role, *action,
        *("--rpc-url", "http://127.0.0.1:9", "--key", "dev:1", "--data-dir", str(tmp_path)),
        *("--manager", MANAGER, *flags),
    )  # fmt: skip
    one_line_error(proc, message)


def test_a_bad_environment_value_names_the_variable(no_env):
    no_env.setenv("VTP_DATASET_CACHE_MIB", "lots")
    with pytest.raises(ConfigError) as err:
        fetch_of("solver")
    assert err.value.problems == [
        "data_cache_mib (VTP_DATASET_CACHE_MIB='lots'): expected a whole number of MiB >= 1"
    ]
    no_env.setenv("VTP_DATASET_CACHE_MIB", "8")
    no_env.setenv("VTP_DATASET_STORES", "gopher://x")
    with pytest.raises(ConfigError) as err:
        fetch_of("solver")
    assert err.value.problems[0].startswith(
        "data_store (VTP_DATASET_STORES='gopher://x'): blob URL"
    )
