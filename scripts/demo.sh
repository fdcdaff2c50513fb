#!/usr/bin/env bash
# The run command: installs what is needed, builds a release topogate, and starts the
# demo server (certificates, a token and the runbook's data-center inventory in
# ./topogate-demo, served on https://127.0.0.1:8443) until interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target topogate
exec ./build/release/cli/topogate demo "$@"
