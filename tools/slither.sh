#!/usr/bin/env bash
# Static analysis of the marketplace contracts (contracts/market and what they import) with
# slither, compiled through the project's solcjs shim (tools/solc/solc) in standard-JSON mode.
# Settings live in slither.config.json. Exit status: non-zero on any high or medium finding
# (accepted low/informational findings are listed with reasons in docs/SLITHER.md).
# Extra arguments are passed to slither, e.g. `tools/slither.sh --json build/slither.json`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PWD/.venv/bin:$PATH"
exec slither contracts/market --config-file slither.config.json "$@"
