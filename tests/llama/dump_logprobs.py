#!/usr/bin/env python3
"""llama.cpp (llama-cpp-python) as an executor of logprobs validation, for
llm/examples/validation_rates.rs.

    tests/llama/.venv/bin/python tests/llama/dump_logprobs.py --prompts PROMPTS.json \\
        --out ANSWERS.json [--model FILE.gguf] [--threads 1]

PROMPTS.json is what `validation_rates --write-prompts FILE` writes: the prompt token ids of
every chat (so both sides run the very same prompt tokens), the temperatures, the seed,
max_tokens, k and the end-of-generation token ids. For every prompt and temperature this
decodes one token at a time, as a server does, and records per position the chosen token,
its log-probability and the top-k, plus the stop position when an end-of-generation token
came. Log-probabilities are computed from llama.cpp's raw logits exactly as gonka-llm
computes them from its own (f32 log-softmax, the sum of exponentials in f64), and written in
the chain's fixed point, round(lp * 2^16) with ties away from zero; the top-k is most likely
first, lower id first on ties. Temperature 0 is greedy (lowest id on ties); other
temperatures sample softmax(logits / T) with numpy's PCG64 seeded per answer (not gonka-llm's
sampler: the validator scores whatever tokens the executor chose).

ANSWERS.json is what `validation_rates --executor-json FILE` reads.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import no_amx  # noqa: F401  (llama.cpp's AMX buffers off, before any model loads)

from llama_cpp import Llama  # noqa: E402


def log_softmax(logits):
    """gonka-llm's log_softmax: f32 differences, the sum of exponentials in f64."""
    z = logits - logits.max()
    log_sum = np.float32(math.log(np.exp(z.astype(np.float64)).sum()))
    return z - log_sum


def fixed(lp):
    """round(lp * 2^16), ties away from zero (gonka_llm::logprob_to_fixed)."""
    y = float(lp) * 65536.0
    return int(math.copysign(math.floor(abs(y) + 0.5), y))


def top_k(lp, k):
    """The k largest, most likely first, lower id first on ties."""
    kth = np.partition(lp, -k)[-k]
    ids = np.nonzero(lp >= kth)[0]
    order = np.lexsort((ids, -lp[ids]))[:k]
    return [int(i) for i in ids[order]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_model = os.path.join(
        os.environ.get("GONKA_HOME", os.path.expanduser("~/.gonka")),
        "models",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
    )
    parser.add_argument("--prompts", required=True, help="validation_rates --write-prompts output")
    parser.add_argument("--out", required=True, help="where to write the answers")
    parser.add_argument("--model", default=os.environ.get("GONKA_LLM_MODEL", default_model))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    spec = json.load(open(args.prompts))
    k, max_tokens = spec["k"], spec["max_tokens"]
    stop_tokens = set(spec["stop_tokens"])
    longest = max(len(p["tokens"]) for p in spec["prompts"]) + max_tokens + 1
    llm = Llama(
        model_path=args.model,
        n_ctx=max(512, longest),
        n_batch=512,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        logits_all=True,
        verbose=False,
    )
    assert llm.n_vocab() == spec["vocab"], (llm.n_vocab(), spec["vocab"])

    def position(lp, token):
        return {
            "token": token,
            "logprob": fixed(lp[token]),
            "top": [[t, fixed(lp[t])] for t in top_k(lp, k)],
        }

    answers = []
    for p in spec["prompts"]:
        for temperature in spec["temperatures"]:
            rng = np.random.default_rng(spec["seed"] + p["id"])
            t0 = time.perf_counter()
            llm.reset()
            llm.eval(p["tokens"])
            tokens, positions, stop = [], [], None
            while len(tokens) < max_tokens:
                logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
                lp = log_softmax(logits)
                if temperature == 0:
                    token = top_k(lp, 1)[0]
                else:
                    x = logits.astype(np.float64) / temperature
                    w = np.exp(x - x.max())
                    token = int(rng.choice(len(w), p=w / w.sum()))
                positions.append(position(lp, token))
                if token in stop_tokens:
                    stop = token
                    break
                tokens.append(token)
                if len(tokens) == max_tokens:
                    break
                llm.eval([token])
            answers.append(
                {
                    "prompt": p["id"],
                    "temperature": temperature,
                    "prompt_tokens": p["tokens"],
                    "tokens": tokens,
                    "stop": stop,
                    "positions": positions,
                    "generate_s": time.perf_counter() - t0,
                }
            )
        print(f"llama.cpp: prompt {p['id'] + 1}/{len(spec['prompts'])}", file=sys.stderr, flush=True)

    out = {
        "source": f"llama.cpp (llama-cpp-python {__import__('llama_cpp').__version__}), "
        f"{args.threads} thread(s)",
        "k": k,
        "max_tokens": max_tokens,
        "answers": answers,
    }
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    sys.exit(main())
