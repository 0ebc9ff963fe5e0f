"""The offline toolchain: the solcjs shim behaves like native solc, ABIs are exported, and every
contract fits the EIP-170 code size limit."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "tools" / "solc" / "solc"


def _standard_json(sources: dict, *args: str, outputs: list[str] | None = None) -> dict:
    request = {
        "language": "Solidity",
        "sources": sources,
        "settings": {
            "evmVersion": "paris",
            "outputSelection": {"*": {"*": outputs or ["abi"], "": ["ast"]}},
        },
    }
    proc = subprocess.run(
        [str(SHIM), "--standard-json", *args],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout)


def test_shim_version_matches_native_format():
    out = subprocess.run([str(SHIM), "--version"], capture_output=True, text=True, check=True)
    assert re.search(r"^Version: 0\.8\.37\+commit\.[0-9a-f]{8}\.Linux\.g\+\+$", out.stdout, re.M)


def test_shim_resolves_imports_through_base_and_include_paths(tmp_path):
    base, include = tmp_path / "base", tmp_path / "lib"
    (base / "src").mkdir(parents=True)
    include.mkdir()
    header = "// SPDX-License-Identifier: MIT\npragma solidity 0.8.37;\n"
    (base / "src" / "B.sol").write_text(header + "contract B {}\n")
    (include / "C.sol").write_text(header + "contract C {}\n")
    main = (
        "// SPDX-License-Identifier: MIT\npragma solidity 0.8.37;\n"
        'import "src/B.sol"; import "C.sol";\ncontract A is B, C {}\n'
    )
    out = _standard_json(
        {"A.sol": {"content": main}},
        "--base-path", str(base), "--include-path", str(include),
    )  # fmt: skip
    assert not [e for e in out.get("errors", []) if e["severity"] == "error"], out["errors"]
    assert set(out["contracts"]) == {"A.sol", "src/B.sol", "C.sol"}


def test_shim_reports_missing_import_as_compiler_error(tmp_path):
    main = '// SPDX-License-Identifier: MIT\npragma solidity 0.8.37;\nimport "nope.sol";\n'
    out = _standard_json({"A.sol": {"content": main}}, "--base-path", str(tmp_path))
    errors = [e for e in out["errors"] if e["severity"] == "error"]
    assert errors and "nope.sol" in errors[0]["formattedMessage"]


def test_shim_output_is_not_truncated_beyond_64k():
    # OpenZeppelin's ERC20 with ASTs and bytecode produces well over 64 KiB of JSON.
    oz = REPO / "node_modules" / "@openzeppelin" / "contracts"
    source = (
        "// SPDX-License-Identifier: MIT\npragma solidity 0.8.37;\n"
        'import "@openzeppelin/contracts/token/ERC20/ERC20.sol";\n'
        'contract T is ERC20 { constructor() ERC20("t", "t") {} }\n'
    )
    proc = subprocess.run(
        [str(SHIM), "--standard-json", "--base-path", str(REPO), "--include-path",
         str(REPO / "node_modules")],
        input=json.dumps({
            "language": "Solidity",
            "sources": {"T.sol": {"content": source}},
            "settings": {"outputSelection": {"*": {"*": ["abi", "evm.bytecode"], "": ["ast"]}}},
        }),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert oz.exists()
    assert len(proc.stdout) > 65_536
    out = json.loads(proc.stdout)
    assert out["contracts"]["T.sol"]["T"]["evm"]["bytecode"]["object"]


def test_exported_abi_is_plain_json_with_bytecode():
    artifact = json.loads((REPO / "build" / "abi" / "TestToken.json").read_text())
    assert artifact["contractName"] == "TestToken"
    assert any(item.get("name") == "mint" for item in artifact["abi"])
    assert artifact["bytecode"].startswith("0x") and len(artifact["bytecode"]) > 100
    index = json.loads((REPO / "build" / "abi" / "index.json").read_text())
    assert "TestToken" in index["contracts"]


#: Most bytes of runtime code a contract may have on Ethereum and its rollups (EIP-170).
EIP170_LIMIT = 24_576


def test_every_exported_contract_fits_the_eip170_code_size_limit():
    # Anvil refuses an oversized deployment too, but only here does the failure name the
    # contract and its size; the job manager is the closest to the limit (PROTOCOL §6)
    sizes = {}
    for path in (REPO / "build" / "abi").glob("*.json"):
        artifact = json.loads(path.read_text())
        if isinstance(artifact, dict) and len(artifact.get("deployedBytecode", "")) > 2:
            sizes[artifact["contractName"]] = (len(artifact["deployedBytecode"]) - 2) // 2
    assert sizes.get("JobManager", 0) > 10_000, sizes
    assert {name: n for name, n in sizes.items() if n > EIP170_LIMIT} == {}


def test_every_exported_contract_s_creation_code_fits_the_eip3860_limit():
    """EIP-3860 (Shanghai on) caps a creation's initcode at twice EIP-170: the job manager's
    carries the forced-error judge's and the extension's creation code (it creates both)."""
    sizes = {}
    for path in (REPO / "build" / "abi").glob("*.json"):
        artifact = json.loads(path.read_text())
        if isinstance(artifact, dict) and len(artifact.get("bytecode", "")) > 2:
            sizes[artifact["contractName"]] = (len(artifact["bytecode"]) - 2) // 2
    assert sizes.get("JobManager", 0) > sizes.get("JobManagerExtension", 0) > 5_000, sizes
    assert {name: n for name, n in sizes.items() if n > 2 * EIP170_LIMIT} == {}
