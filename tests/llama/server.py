#!/usr/bin/env python3
"""llama-cpp-python's OpenAI-compatible server (llama_cpp.server) on one GGUF model, with
llama.cpp's extra buffer types off, for the ML node's upstream test
(node/tests/upstream_llama.rs, run by scripts/test-upstream-llama.sh).

    tests/llama/.venv/bin/python tests/llama/server.py --model FILE.gguf [--port 0] [--threads 2]

`python -m llama_cpp.server` cannot be used as is: llama.cpp's "extra buffer types" put Q4_1
weights in its AMX buffer on CPUs that report AMX, and its AMX matmul dies with a general
protection fault on the first completion (scripts/bench-llm-anchor.sh has the same fix). The
server's settings have no switch for them, so the model defaults are patched before
llama_cpp.server builds the model.

The socket is bound and listening before the model loads; once the model is loaded the
server prints one line `listening on http://127.0.0.1:PORT` on stdout (PORT is the one the
system chose for --port 0) and serves until killed. A request that arrives earlier waits in
the listen backlog.
"""
import argparse
import socket
import sys

import no_amx  # noqa: F401  (llama.cpp's AMX buffers off, before any model loads)

import uvicorn  # noqa: E402
from llama_cpp.server.app import create_app  # noqa: E402
from llama_cpp.server.settings import ModelSettings, ServerSettings  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", default=None, help="the model name it serves (default: the path)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port, printed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=2048)
    args = parser.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    host, port = sock.getsockname()

    app = create_app(
        server_settings=ServerSettings(host=host, port=port),
        model_settings=[
            ModelSettings(
                model=args.model,
                model_alias=args.alias,
                n_ctx=args.n_ctx,
                n_threads=args.threads,
                n_threads_batch=args.threads,
                verbose=False,
            )
        ],
    )
    print(f"listening on http://{host}:{port}", flush=True)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
