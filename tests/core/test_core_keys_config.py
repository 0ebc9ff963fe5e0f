"""Key sources (keystore round-trip, env, dev-key refusal) and config validation."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from eth_account import Account
from eth_utils import keccak

from agents.cli.options import add_options, build
from agents.core.chain import dev_private_key
from agents.core.config import AgentConfig, ConfigError
from agents.core.keys import KeyConfigError, load_account, parse_key_source, write_keystore

SECRET = "0x" + keccak(text="a production key").hex()


def test_keystore_roundtrip_with_password_env_and_file(tmp_path: Path) -> None:
    path = write_keystore(SECRET, tmp_path / "k.json", "hunter2", iterations=2)
    assert path.stat().st_mode & 0o777 == 0o600
    expected = Account.from_key(SECRET).address
    via_env = load_account(f"keystore:{path}", 1, env={"VTP_KEY_PASSWORD": "hunter2"})
    assert via_env.address == expected and via_env.key.hex().endswith(SECRET[2:])
    (tmp_path / "pw").write_text("hunter2\n")
    via_file = load_account(
        f"keystore:{path}", 1, env={"VTP_KEY_PASSWORD_FILE": str(tmp_path / "pw")}
    )
    assert via_file.address == expected
    with pytest.raises(KeyConfigError, match="wrong password"):
        load_account(f"keystore:{path}", 1, env={"VTP_KEY_PASSWORD": "nope"})
    with pytest.raises(KeyConfigError, match="needs a password: set VTP_KEY_PASSWORD_FILE"):
        load_account(f"keystore:{path}", 1, env={})
    with pytest.raises(KeyConfigError, match="not found"):
        load_account(f"keystore:{tmp_path / 'missing.json'}", 1, env={"VTP_KEY_PASSWORD": "x"})


def test_env_key_and_messages_hold_no_secret() -> None:
    acct = load_account("env:SOLVER_KEY", 1, env={"SOLVER_KEY": SECRET})
    assert acct.address == Account.from_key(SECRET).address
    with pytest.raises(KeyConfigError, match="SOLVER_KEY is not set"):
        load_account("env:SOLVER_KEY", 1, env={})
    with pytest.raises(KeyConfigError) as err:
        load_account("env:SOLVER_KEY", 1, env={"SOLVER_KEY": SECRET[:-2]})
    assert SECRET[2:20] not in str(err.value)


def test_dev_keys_only_on_dev_chain(tmp_path: Path) -> None:
    assert load_account("dev:3", 31337).address == Account.from_key(dev_private_key(3)).address
    with pytest.raises(KeyConfigError) as err:
        load_account("dev:3", 1)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("refusing Anvil dev key dev:3 on chain id 1")
    # A dev key smuggled in through env or a keystore is refused just the same.
    with pytest.raises(KeyConfigError, match="one of Anvil's public dev keys"):
        load_account("env:K", 10, env={"K": dev_private_key(0)})
    path = write_keystore(dev_private_key(5), tmp_path / "dev.json", "pw", iterations=2)
    with pytest.raises(KeyConfigError, match="one of Anvil's public dev keys"):
        load_account(f"keystore:{path}", 8453, env={"VTP_KEY_PASSWORD": "pw"})


def test_parse_key_source_errors() -> None:
    assert str(parse_key_source("dev:0")) == "dev:0"
    for bad in ("", "0xabc", "vault:x", "dev:one", "env:1BAD"):
        with pytest.raises(KeyConfigError, match="key source"):
            parse_key_source(bad)


def load_config(argv: list[str], env: dict[str, str]) -> AgentConfig:
    """AgentConfig from a command line, as every role's command parses it (agents/cli)."""
    parser = argparse.ArgumentParser()
    add_options(parser, AgentConfig)
    return build(AgentConfig, parser.parse_args(argv), env)


def test_config_flags_beat_env_beat_defaults(tmp_path: Path) -> None:
    env = {"VTP_KEY": "env:K", "VTP_DATA_DIR": str(tmp_path), "VTP_CONFIRMATIONS": "5"}
    cfg = load_config(["--confirmations", "3", "--rpc-url", "http://127.0.0.1:8545"], env)
    assert cfg == AgentConfig(key="env:K", data_dir=tmp_path, rpc_url="http://127.0.0.1:8545",
                              confirmations=3)  # fmt: skip
    assert cfg.db_path == tmp_path / "agent.db"
    assert cfg.blob_location == str(tmp_path / "blobs")
    cfg = load_config(["--blob-url", "s3://bucket/ckpt?endpoint=http://127.0.0.1:9000"], env)
    assert cfg.confirmations == 5 and cfg.blob_location.startswith("s3://bucket/")


def test_config_reports_every_problem_clearly() -> None:
    argv = ["--rpc-url", "localhost:8545", "--confirmations", "-1", "--poll-interval", "0",
            "--blob-url", "ftp://x", "--key", "dev"]  # fmt: skip
    with pytest.raises(ConfigError) as err:
        load_config(argv, env={})
    problems = err.value.problems
    assert len(problems) == 6, problems
    text = "\n".join(problems)
    assert "rpc_url (--rpc-url='localhost:8545'): expected an http(s):// or ws(s):// URL" in text
    assert "confirmations (--confirmations='-1'): expected an integer >= 0" in text
    assert "poll_interval (--poll-interval='0'): expected a number of seconds > 0" in text
    assert "blob_url (--blob-url='ftp://x')" in text
    assert "key (--key='dev'): key source 'dev'" in text
    assert "data_dir: required; pass --data-dir or set VTP_DATA_DIR" in text


def test_a_role_config_nests_the_agent_config_and_adds_its_own(tmp_path: Path) -> None:
    from agents.roles.config import SolverConfig

    parser = argparse.ArgumentParser()
    add_options(parser, SolverConfig)
    argv = ["--key", "dev:1", "--data-dir", str(tmp_path), "--stake", "4", "--no-progress"]
    cfg = build(SolverConfig, parser.parse_args(argv), env={"VTP_UNITS_PER_ROUND": "3"})
    assert cfg.agent == AgentConfig(key="dev:1", data_dir=tmp_path)
    assert (cfg.stake, cfg.progress, cfg.units_per_round, cfg.memory_mib) == (4.0, False, 3, 4096)
    with pytest.raises(ConfigError) as err:
        build(SolverConfig, parser.parse_args(["--stake", "-1", "--spec-store", "ftp"]), env={})
    assert err.value.problems == [
        "key: required; pass --key or set VTP_KEY",
        "data_dir: required; pass --data-dir or set VTP_DATA_DIR",
        "stake (--stake='-1'): expected a number > 0",
    ]


def test_derived_secret_is_the_keys_keccak_with_its_words_and_differs_per_word():
    """The solver's forced-error secret (PROTOCOL §8.1): keccak(key ‖ unit ‖ attempt), as it was
    computed in the role before the key's bytes moved behind agents.core.keys."""
    from eth_account import Account
    from eth_utils import keccak

    from agents.core.keys import derived_secret

    account = Account.from_key("0x" + "11" * 32)
    expected = keccak(bytes.fromhex("11" * 32) + (7).to_bytes(32, "big") + (2).to_bytes(32, "big"))
    assert derived_secret(account, 7, 2) == expected
    assert derived_secret(account, 7, 3) != expected
    assert derived_secret(Account.from_key("0x" + "22" * 32), 7, 2) != expected
