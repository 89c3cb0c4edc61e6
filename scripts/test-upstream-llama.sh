#!/usr/bin/env bash
# Runs the ML node's forwarding backend against a real OpenAI-compatible server:
# node/tests/upstream_llama.rs, ignored by the default `cargo test`, with llama-cpp-python's
# server (tests/llama/server.py) on SmolLM2-135M-Instruct Q4_1. Creates the virtual environment
# tests/llama/.venv when missing (llama-cpp-python[server], pinned in tests/llama/requirements.txt;
# it builds from source, ~12 minutes on 2 cores; pip keeps the wheel in its cache), fetches the
# model (scripts/fetch-model.sh), then runs the test. Extra arguments go to the test binary,
# e.g. `scripts/test-upstream-llama.sh --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-}" in
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

VENV=tests/llama/.venv
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import llama_cpp.server.app, uvicorn' 2>/dev/null; then
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        "$VENV/bin/pip" install --disable-pip-version-check -r tests/llama/requirements.txt
fi

# The test reads the model where GONKA_LLM_MODEL points, else where fetch-model.sh stores it.
if [[ -n "${GONKA_LLM_MODEL:-}" ]]; then
    [[ -f "$GONKA_LLM_MODEL" ]] || { echo "GONKA_LLM_MODEL=$GONKA_LLM_MODEL: no such file" >&2; exit 1; }
else
    scripts/fetch-model.sh >/dev/null
fi

exec cargo test -p gonka-node --test upstream_llama -- --ignored "$@"
