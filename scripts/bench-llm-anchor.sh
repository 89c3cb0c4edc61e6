#!/usr/bin/env bash
# Anchors gonka-llm's throughput to llama.cpp: runs `cargo bench -p gonka-llm` (which writes
# target/gonka-llm-bench.json), then llama-cpp-python (tests/llama/.venv, pinned in
# tests/llama/requirements.txt) on the same model file, the same prompt tokens and the same
# decoded tokens at the same thread counts, and prints both decode rates and their ratio.
set -euo pipefail

usage() {
    cat <<USAGE
usage: scripts/bench-llm-anchor.sh [--no-cargo] [--help]

  --no-cargo   reuse target/gonka-llm-bench.json from an earlier 'cargo bench -p gonka-llm'

The model is \$GONKA_LLM_MODEL or \${GONKA_HOME:-\$HOME/.gonka}/models/SmolLM2-135M-Instruct.Q4_1.gguf
(scripts/fetch-model.sh). The venv is created on first use (llama-cpp-python builds from source,
~15 minutes on 2 cores; pip keeps the wheel in its cache).
USAGE
}

RUN_CARGO=1
case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    --no-cargo) RUN_CARGO=0 ;;
    "") ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
MODEL="${GONKA_LLM_MODEL:-${GONKA_HOME:-$HOME/.gonka}/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[[ -f "$MODEL" ]] || { echo "model $MODEL missing: run scripts/fetch-model.sh" >&2; exit 1; }
VENV=tests/llama/.venv
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
    python3 -m venv "$VENV"
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" "$VENV/bin/pip" install -r tests/llama/requirements.txt
fi
if [[ $RUN_CARGO == 1 ]]; then
    GONKA_LLM_MODEL="$MODEL" cargo bench -p gonka-llm
fi

"$VENV/bin/python" - target/gonka-llm-bench.json "$MODEL" <<'PY'
import json, statistics, sys, time
sys.path.insert(0, "tests/llama")
import no_amx  # llama.cpp's AMX buffers off (they crash on some VMs); its AVX512 kernels run
from llama_cpp import Llama

ours = json.load(open(sys.argv[1]))
model = sys.argv[2]
REPEATS = 3

def median_time(f):
    xs = []
    for _ in range(REPEATS):
        t = time.perf_counter(); f(); xs.append(time.perf_counter() - t)
    return statistics.median(xs)

ref = ours[0]
prefill, prompt, decoded = ref["prefill_prompt"], ref["decode_prompt"], ref["decoded"]
llama = {}
for threads in sorted({r["threads"] for r in ours}):
    llm = Llama(model_path=model, n_ctx=2048, n_batch=512, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    llm.eval(prompt[:8]); llm.reset()  # warm-up

    def run_prefill():
        llm.reset(); llm.eval(prefill)
    prefill_s = median_time(run_prefill)

    def run_decode():
        llm.reset(); llm.eval(prompt)
        t = time.perf_counter()
        for tok in decoded[:-1]:
            llm.eval([tok])
        return time.perf_counter() - t
    decode_s = statistics.median(run_decode() for _ in range(REPEATS))
    llama[threads] = (len(prefill) / prefill_s, (len(decoded) - 1) / decode_s)
    del llm

print()
print(f"llama.cpp (llama-cpp-python) on {model}: same prompt ({len(prefill)} and {len(prompt)} tokens), "
      f"same {len(decoded)} decoded tokens")
print(f"{'threads':>7} {'weights':>7} {'ours prefill':>13} {'llama prefill':>14} {'ours decode':>12} "
      f"{'llama decode':>13} {'decode ratio':>13}")
for r in ours:
    lp, ld = llama[r["threads"]]
    print(f"{r['threads']:>7} {r['weights']:>7} {r['prefill_tps']:>13.1f} {lp:>14.1f} "
          f"{r['decode_tps']:>12.1f} {ld:>13.1f} {100 * r['decode_tps'] / ld:>12.1f}%")
PY
