#!/usr/bin/env bash
# Static analysis of every deployable contract with slither, compiled through the project's
# solcjs shim (tools/solc/solc) in standard-JSON mode with the same optimizer and EVM version as
# ape-config.yaml, but the legacy code generator (the build uses via-IR; slither reads the AST,
# which is the same, and the legacy pipeline compiles several times faster). Settings live in slither.config.json. Targets: the marketplace
# (contracts/market), the dispute game (contracts/dispute) and the harnesses (contracts/harness),
# each with everything it imports (libraries, interfaces).
# Exit status: non-zero on any high or medium finding (accepted low/informational findings are
# listed with reasons in docs/SLITHER.md). Extra arguments are passed to every slither run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PWD/.venv/bin:$PATH"
status=0
for target in contracts/market contracts/dispute contracts/harness; do
  echo "== slither $target"
  slither "$target" --config-file slither.config.json "$@" || status=1
done
exit $status
