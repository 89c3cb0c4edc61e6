#!/usr/bin/env bash
# Runs the whole test suite: makes sure CometBFT v0.38.25 is installed and on PATH (the
# localnet and end-to-end tests run it), then `cargo test --workspace` with any extra arguments,
# e.g. `scripts/test.sh -p gonka-localnet` or `scripts/test.sh -- --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-cometbft.sh
source scripts/ensure-cometbft.sh
# The end-to-end tests start the sidecar binary next to gonkad; build it even when the
# arguments select only some packages, with the `testing` feature: tests/e2e/disputes.rs runs a
# cheating ML node (`--testing-cheat-fraction`). `cargo test` below does not overwrite it: the
# gonka-sidecar package has no integration tests, so cargo builds its binary only as a unit-test
# harness (under target/debug/deps).
cargo build -p gonka-sidecar --bin gonka-sidecar --features testing
exec cargo test --workspace "$@"
