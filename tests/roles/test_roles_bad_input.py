"""Bad input gives one clear line and a non-zero exit (or, inside a running agent, a logged
error and a retry): a malformed spec, an unreachable RPC, a key without funds, a blob that
fails its root check; and every role has a complete --help."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import rolekit as rk

from agents.core.blobs import open_blob_store
from agents.data.builtin import load_dataset
from agents.roles.artifacts import BadBlob, CheckpointReader, Manifest, encode_state, make_locator
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.state import state_root

REPO = Path(__file__).resolve().parents[2]
MANAGER = "0x" + "12" * 20
ROLES = ("submitter", "solver", "verifier", "whistleblower")


def agents_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "agents", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(proc: subprocess.CompletedProcess, starts: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(starts), lines[0]
    return lines[0]


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_a_complete_help(role):
    proc = agents_cli(role, "--help")
    assert proc.returncode == 0
    for flag in ("--rpc-url", "--key", "--data-dir", "--manager", "--json-logs", "--blob-url"):
        assert flag in proc.stdout, flag
    extra = {
        "submitter": "--spec",
        "solver": "--cheat",
        "verifier": "--lazy",
        "whistleblower": "--stake",
    }[role]
    assert extra in proc.stdout


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"version": 1}), "job spec field"),
        (None, "No such file"),
    ],
)
def test_malformed_spec_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "spec.json"
    if content is not None:
        path.write_text(content)
    proc = agents_cli(
        "submitter",
        "--rpc-url",
        "http://127.0.0.1:9",
        "--key",
        "dev:1",
        "--data-dir",
        str(tmp_path / "d"),
        "--manager",
        MANAGER,
        "--spec",
        str(path),
    )
    line = one_line_error(proc, "error: ")
    assert message in line


@pytest.mark.parametrize("role", ROLES)
def test_unreachable_rpc_is_one_line(tmp_path, role):
    extra = ["--spec", "examples/digits-mlp.json"] if role == "submitter" else []
    proc = agents_cli(
        role,
        "--rpc-url",
        "http://127.0.0.1:9",
        "--key",
        "dev:3",
        "--data-dir",
        str(tmp_path / "d"),
        "--manager",
        MANAGER,
        *extra,
    )
    one_line_error(proc, "error: cannot reach RPC http://127.0.0.1:9")


def test_missing_key_and_bad_cheat_are_one_line(tmp_path):
    proc = agents_cli(
        "solver",
        "--rpc-url",
        "http://127.0.0.1:9",
        "--data-dir",
        str(tmp_path),
        "--manager",
        MANAGER,
    )
    one_line_error(proc, "error: key: required")
    proc = agents_cli(
        "solver",
        "--rpc-url",
        "http://127.0.0.1:9",
        "--key",
        "dev:1",
        "--data-dir",
        str(tmp_path),
        "--manager",
        MANAGER,
        "--cheat",
        "gremlin:step=1",
    )
    one_line_error(proc, "error: --cheat 'gremlin:step=1': kind must be one of")


def test_non_positive_max_params_is_one_line(tmp_path):
    proc = agents_cli(
        "verifier",
        *("--rpc-url", "http://127.0.0.1:9", "--key", "dev:1", "--data-dir", str(tmp_path)),
        *("--manager", MANAGER, "--max-params", "0"),
    )
    one_line_error(proc, "error: max_params (--max-params='0'): expected a whole number > 0")


def test_non_positive_state_cache_is_one_line(tmp_path):
    proc = agents_cli(
        "solver",
        *("--rpc-url", "http://127.0.0.1:9", "--key", "dev:1", "--data-dir", str(tmp_path)),
        *("--manager", MANAGER, "--state-cache-mib", "-1"),
    )
    one_line_error(
        proc, "error: state_cache_mib (--state-cache-mib='-1'): expected a whole number > 0"
    )


def test_non_positive_max_loaded_jobs_is_one_line(tmp_path):
    proc = agents_cli(
        "whistleblower",
        *("--rpc-url", "http://127.0.0.1:9", "--key", "dev:1", "--data-dir", str(tmp_path)),
        *("--manager", MANAGER, "--max-loaded-jobs", "0"),
    )
    one_line_error(
        proc, "error: max_loaded_jobs (--max-loaded-jobs='0'): expected a whole number > 0"
    )


def test_claim_window_beyond_the_managers_horizon_is_one_line(tmp_path):
    """The job manager refuses a claim deadline more than a day away (MAX_CLAIM_HORIZON): the
    submitter says so before it touches the chain."""
    proc = agents_cli(
        "submitter",
        "--rpc-url",
        "http://127.0.0.1:9",
        "--key",
        "dev:3",
        "--data-dir",
        str(tmp_path / "d"),
        "--manager",
        MANAGER,
        "--spec",
        "examples/digits-mlp.json",
        "--claim-window",
        "90000",
    )
    one_line_error(proc, "error: --claim-window 90000: must be in (0, 86400]")


def test_keys_without_funds_are_one_line(tmp_path):
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3)
        # a dev account with ether but no tokens
        proc = agents_cli(
            "solver",
            "--rpc-url",
            url,
            "--key",
            "dev:9",
            "--data-dir",
            str(tmp_path / "s"),
            "--manager",
            addrs["JobManager"],
            # its blobs are a local folder, as in every test: said in a warning line without it
            "--allow-local-locators",
        )
        line = one_line_error(proc, "error: account 0x")
        assert "holds 0 tokens, staking needs 200" in line
        # a fresh key with neither tokens nor ether
        env_key = "0x" + "5a" * 32
        os.environ["VTP_TEST_EMPTY_KEY"] = env_key
        try:
            proc = agents_cli(
                "submitter",
                "--rpc-url",
                url,
                "--key",
                "env:VTP_TEST_EMPTY_KEY",
                "--data-dir",
                str(tmp_path / "p"),
                "--manager",
                addrs["JobManager"],
                "--spec",
                "examples/digits-mlp.json",
            )
        finally:
            del os.environ["VTP_TEST_EMPTY_KEY"]
        assert "the job's reward is 10:" in one_line_error(proc, "error: account 0x")


def test_blob_that_fails_its_root_check_is_refused(tmp_path):
    # one segment (the manifest lists T/k + 1 = 2 checkpoints); the locator names a folder,
    # which a reader opens only when allowed (local_ok: --allow-local-locators)
    spec = dataclasses.replace(specs.load(REPO / "examples" / "digits-mlp.json"), steps=40)
    eng = Engine(spec, load_dataset(spec.dataset_name))
    s0 = eng.initial_state()
    s1 = eng.step(s0, 0)
    store = open_blob_store(str(tmp_path / "blobs"))
    addrs = [store.put(encode_state(s)) for s in (s0, s1)]
    m = Manifest(
        "0x" + spec.spec_hash().hex(),
        ["0x" + state_root(s).hex() for s in (s0, s1)],
        addrs,
        [0.0, 0.0],
    )
    locator = make_locator(str(tmp_path / "blobs"), store.put(m.to_bytes()))
    reader = CheckpointReader(spec, locator, m.checkpoint_root(), local_ok=True)
    assert state_root(reader.state(1)) == state_root(s1)
    # a manifest read against another commitment is refused
    with pytest.raises(BadBlob, match="the chain has 0x"):
        CheckpointReader(spec, locator, b"\x01" * 32, local_ok=True)
    # a state blob whose bytes were altered fails the store's content check
    path = store.backend.path(addrs[1])
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(BadBlob, match="checkpoint 1 blob .* corrupt"):
        reader.state(1)
    # a well-formed blob holding another state fails the state-root check
    other = store.put(encode_state(eng.step(s1, 1)))
    m2 = Manifest(m.spec_hash, m.roots, [addrs[0], other], m.losses)
    locator2 = make_locator(str(tmp_path / "blobs"), store.put(m2.to_bytes()))
    reader2 = CheckpointReader(spec, locator2, m2.checkpoint_root(), local_ok=True)
    with pytest.raises(BadBlob, match="has state root 0x.*the manifest says"):
        reader2.state(1)
    with pytest.raises(BadBlob, match="expected '<store URL>#0x<address>'"):
        CheckpointReader(spec, "no-locator", m.checkpoint_root())
