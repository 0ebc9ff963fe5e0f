"""Export every compiled project contract as plain JSON for integrators.

Reads ape's build manifest (`.build/__local__.json`) and writes, per contract,
`<out>/<ContractName>.json` = {contractName, sourceId, abi, bytecode, deployedBytecode}, plus an
`index.json` listing them, `enums.json`: every enum the protocol's sources declare, by
qualified name (`IJobManager.UnitStatus`, or `Phase` for a file-level enum), as
{member: number}, and `errors.json`: one ABI holding every custom error and event of every
protocol contract (test contracts and harnesses left out), so a client decodes any revert or log
of the protocol with one file, with `selectors` (error selector -> signature), and
`protocol.json`: the integrator's one file (PROTOCOL §6.12) — that ABI plus the dev chain's payment
token (TestToken, whose ERC-20 errors every OpenZeppelin token raises), the error-selector and
event-topic tables, the enums and every protocol contract's NatSpec (solc's userdoc and devdoc,
which ape keeps in its manifest). Non-Python clients need nothing but these files.

ape keeps no AST in its manifest (ape-solidity asks solc for one but drops it), so the enums come
from solc itself: the manifest's own source texts, parsed only (`stopAfter: parsing`, which needs
no import resolution and takes seconds), through the same compiler command ape uses.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MANIFEST = Path(".build/__local__.json")
# Test contracts and float32 harnesses: tools of the tests, not the protocol.
NOT_PROTOCOL = ("contracts/test/", "contracts/dispute/test/", "contracts/harness/")
# Not protocol sources, but what a client meets on a dev chain: deploy_all's payment token there.
DEV_CHAIN_CONTRACTS = ("TestToken",)
PROTOCOL_FORMAT = "vtp.protocol-abi.v1"
# The solc shim (tools/solc/solc); `SOLC` overrides it, for a native solc.
SOLC = Path(os.environ.get("SOLC", Path(__file__).resolve().parent / "solc" / "solc"))


def _hex(code: dict | None) -> str:
    return (code or {}).get("bytecode") or "0x"


def export(manifest_path: Path, out_dir: Path) -> list[str]:
    manifest = json.loads(manifest_path.read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.json"):
        stale.unlink()
    names = []
    for name, ctype in sorted(manifest["contractTypes"].items()):
        artifact = {
            "contractName": name,
            "sourceId": ctype.get("sourceId"),
            "abi": ctype["abi"],
            "bytecode": _hex(ctype.get("deploymentBytecode")),
            "deployedBytecode": _hex(ctype.get("runtimeBytecode")),
        }
        (out_dir / f"{name}.json").write_text(json.dumps(artifact, indent=1) + "\n")
        names.append(name)
    (out_dir / "index.json").write_text(json.dumps({"contracts": names}, indent=1) + "\n")
    enums = compiled_enums(manifest["sources"])
    (out_dir / "enums.json").write_text(json.dumps(enums, indent=1) + "\n")
    protocol = {
        name: ctype["abi"]
        for name, ctype in manifest["contractTypes"].items()
        if not str(ctype.get("sourceId", "")).startswith(NOT_PROTOCOL)
    }
    (out_dir / "errors.json").write_text(json.dumps(errors_and_events(protocol), indent=1) + "\n")
    combined = integrator_abi(manifest["contractTypes"], enums)
    (out_dir / "protocol.json").write_text(json.dumps(combined, indent=1) + "\n")
    return names


def integrator_abi(ctypes: dict[str, dict], enums: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The one file an integrator needs besides the bytecode: every error and event of the
    protocol's contracts and of the dev chain's token (one ABI, each signature once), the tables
    `errors` (selector -> signature) and `events` (topic 0 -> signature), the enums, and the
    NatSpec of each of those contracts (`natspec[name] = {userdoc, devdoc}`)."""
    from eth_utils import keccak

    chosen = {
        name: ctype
        for name, ctype in ctypes.items()
        if name in DEV_CHAIN_CONTRACTS
        or not str(ctype.get("sourceId", "")).startswith(NOT_PROTOCOL)
    }
    both = errors_and_events({name: ctype["abi"] for name, ctype in chosen.items()})
    events = {
        "0x" + keccak(text=_signature(item)).hex(): _signature(item)
        for item in both["abi"]
        if item["type"] == "event"
    }
    natspec = {
        name: {"userdoc": chosen[name].get("userdoc", {}), "devdoc": chosen[name].get("devdoc", {})}
        for name in sorted(chosen)
    }
    return {
        "format": PROTOCOL_FORMAT,
        "contracts": sorted(chosen),
        "abi": both["abi"],
        "errors": both["selectors"],
        "events": dict(sorted(events.items())),
        "enums": enums,
        "natspec": natspec,
    }


def _signature(item: dict) -> str:
    def kind(i: dict) -> str:
        t = i["type"]
        if t.startswith("tuple"):
            return "(" + ",".join(kind(c) for c in i["components"]) + ")" + t[5:]
        return t

    return f"{item['name']}({','.join(kind(i) for i in item['inputs'])})"


def errors_and_events(abis: dict[str, list[dict]]) -> dict[str, Any]:
    """One ABI with every error and event of `abis` (contract name -> ABI), each signature
    once; an error selector shared by two different errors would make a revert ambiguous to
    decode, so it is refused."""
    from eth_utils import keccak

    items: dict[str, dict] = {}
    selectors: dict[str, str] = {}
    for name in sorted(abis):
        for item in abis[name]:
            if item.get("type") not in ("error", "event"):
                continue
            sig = _signature(item)
            items.setdefault(f"{item['type']}:{sig}", item)
            if item["type"] == "error":
                selector = "0x" + keccak(text=sig)[:4].hex()
                if selectors.setdefault(selector, sig) != sig:
                    raise ValueError(f"errors {selectors[selector]} and {sig} share {selector}")
    return {"abi": [items[k] for k in sorted(items)], "selectors": dict(sorted(selectors.items()))}


def _enum_nodes(node: Any, scope: str | None = None) -> Iterator[tuple[str | None, dict]]:
    """(enclosing contract or None, EnumDefinition node) for every enum under an AST node."""
    if isinstance(node, list):
        for child in node:
            yield from _enum_nodes(child, scope)
    elif isinstance(node, dict):
        if node.get("nodeType") == "EnumDefinition":
            yield scope, node
            return
        if node.get("nodeType") == "ContractDefinition":
            scope = node["name"]
        for child in node.values():
            yield from _enum_nodes(child, scope)


def enums_of_asts(asts: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Qualified enum name -> {member: number} over solc ASTs by source id. A Solidity enum's
    numbers are its members' positions (the ABI encodes an enum as that uint8)."""
    enums: dict[str, dict[str, int]] = {}
    for source_id in sorted(asts):
        for scope, node in _enum_nodes(asts[source_id]):
            name = f"{scope}.{node['name']}" if scope else node["name"]
            if name in enums:
                raise ValueError(f"enum {name} is declared twice ({source_id})")
            enums[name] = {m["name"]: i for i, m in enumerate(node["members"])}
    return dict(sorted(enums.items()))


def compiled_enums(sources: dict[str, dict]) -> dict[str, dict[str, int]]:
    """The enums of the manifest's sources (the protocol's own: dependencies are not in it)."""
    request = {
        "language": "Solidity",
        "sources": {sid: {"content": src["content"]} for sid, src in sources.items()},
        "settings": {"stopAfter": "parsing", "outputSelection": {"*": {"": ["ast"]}}},
    }
    done = subprocess.run(
        [str(SOLC), "--standard-json"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
    )
    output = json.loads(done.stdout)
    errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
    if errors:
        raise RuntimeError("solc could not parse the sources: " + errors[0]["formattedMessage"])
    return enums_of_asts({sid: src["ast"] for sid, src in output["sources"].items()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--out", type=Path, default=Path("build/abi"))
    args = parser.parse_args()
    if not args.manifest.exists():
        print(f"error: {args.manifest} not found; run `make compile` first", file=sys.stderr)
        return 2
    names = export(args.manifest, args.out)
    print(f"exported {len(names)} contract ABIs, their enums and protocol.json to {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
