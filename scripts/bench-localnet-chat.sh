#!/usr/bin/env bash
# Times chats through a running localnet's transfer agent 0, as a user sees them: each request
# is one `gonkad chat --no-stream --max-tokens 16` (process start, signing, the TA, the ML node,
# the answer), and prints p50/p90/min wall milliseconds per model.
set -euo pipefail

usage() {
    cat <<USAGE
usage: scripts/bench-localnet-chat.sh [--gonkad PATH] [-n N] [MODEL ...]

  --gonkad PATH   the gonkad binary (default: target/release/gonkad, what scripts/localnet.sh runs)
  -n N            requests per model (default 30)
  MODEL           models to ask (default: gonka/reference-1 and HuggingFaceTB/SmolLM2-135M-Instruct)

Start the localnet first (scripts/localnet.sh); alice pays, from the test keyring.
USAGE
}

GONKAD="${CARGO_TARGET_DIR:-target}/release/gonkad"
N=30
MODELS=()
while (($#)); do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --gonkad) GONKAD="$2"; shift 2 ;;
        -n) N="$2"; shift 2 ;;
        -*) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
        *) MODELS+=("$1"); shift ;;
    esac
done
((${#MODELS[@]})) || MODELS=(gonka/reference-1 HuggingFaceTB/SmolLM2-135M-Instruct)
[[ -x "$GONKAD" ]] || { echo "$GONKAD is missing: build it (scripts/localnet.sh does) or pass --gonkad" >&2; exit 1; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for model in "${MODELS[@]}"; do
    for _ in $(seq "$N"); do
        start=$(date +%s%N)
        if ! "$GONKAD" chat --from alice --keyring-backend test --ta http://127.0.0.1:26661/ \
            --chain-id gonka-localnet --model "$model" --max-tokens 16 --no-stream \
            "What is the capital of France? Answer in one word." > "$out" 2>&1; then
            cat "$out" >&2
            exit 1
        fi
        echo $((($(date +%s%N) - start) / 1000000))
    done | sort -n | awk -v model="$model" '{ms[NR] = $1}
        END {printf "%-40s n=%d  p50 %d ms  p90 %d ms  min %d ms\n", model, NR, ms[int(NR / 2) + 1], ms[int(NR * 0.9)], ms[1]}'
done
