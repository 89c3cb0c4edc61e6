#!/usr/bin/env bash
# Builds gonkad and gonka-sidecar and runs `gonkad localnet` with the given arguments (for example
# `scripts/localnet.sh --validators 4`); makes sure CometBFT v0.38.25 is on PATH first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-cometbft.sh
source scripts/ensure-cometbft.sh
cargo build -p gonka-cli --bin gonkad -p gonka-sidecar --bin gonka-sidecar
exec "${CARGO_TARGET_DIR:-target}/debug/gonkad" localnet "$@"
