"""Export every compiled project contract as plain JSON for integrators.

Reads ape's build manifest (`.build/__local__.json`) and writes, per contract,
`<out>/<ContractName>.json` = {contractName, sourceId, abi, bytecode, deployedBytecode}, plus an
`index.json` listing them. Non-Python clients need nothing but these files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MANIFEST = Path(".build/__local__.json")


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
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--out", type=Path, default=Path("build/abi"))
    args = parser.parse_args()
    if not args.manifest.exists():
        print(f"error: {args.manifest} not found; run `make compile` first", file=sys.stderr)
        return 2
    names = export(args.manifest, args.out)
    print(f"exported {len(names)} contract ABIs to {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
