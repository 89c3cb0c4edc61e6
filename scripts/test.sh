#!/usr/bin/env bash
# Runs the whole test suite: makes sure CometBFT v0.38.25 is installed and on PATH (the
# localnet and end-to-end tests run it), then `cargo test --workspace` with any extra arguments,
# e.g. `scripts/test.sh -p gonka-localnet` or `scripts/test.sh -- --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-cometbft.sh
source scripts/ensure-cometbft.sh
# The end-to-end tests start the sidecar binary next to gonkad; build it even when the
# arguments select only some packages.
cargo build -p gonka-sidecar --bin gonka-sidecar
exec cargo test --workspace "$@"
