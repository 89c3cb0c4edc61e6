# shellcheck shell=bash
# Makes `cometbft` v0.38.25 available on PATH. Meant to be sourced:
#
#     source scripts/ensure-cometbft.sh
#
# Puts Go's install directory ($(go env GOBIN), else the first entry of $(go env GOPATH) + /bin)
# on PATH, and if `cometbft` is missing or is not v0.38.25, runs
#     go install github.com/cometbft/cometbft/cmd/cometbft@v0.38.25
# Prints what it does. Returns non-zero (never exits the sourcing shell) on failure.

_gonka_ensure_cometbft() {
    local want="0.38.25"
    local install="go install github.com/cometbft/cometbft/cmd/cometbft@v${want}"

    if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
        echo "ensure-cometbft: adding /usr/local/go/bin to PATH (go was not on PATH)"
        export PATH="/usr/local/go/bin:${PATH}"
    fi

    local gobin=""
    if command -v go >/dev/null 2>&1; then
        gobin="$(go env GOBIN 2>/dev/null || true)"
        if [ -z "${gobin}" ]; then
            local gopath
            gopath="$(go env GOPATH 2>/dev/null || true)"
            gobin="${gopath%%:*}/bin"
        fi
        case ":${PATH}:" in
            *":${gobin}:"*) ;;
            *)
                echo "ensure-cometbft: adding ${gobin} to PATH"
                export PATH="${gobin}:${PATH}"
                ;;
        esac
    fi
    hash -r 2>/dev/null || true

    local have=""
    if command -v cometbft >/dev/null 2>&1; then
        have="$(cometbft version 2>/dev/null || true)"
    fi
    if [ "${have}" = "${want}" ]; then
        echo "ensure-cometbft: using cometbft ${have} at $(command -v cometbft)"
        return 0
    fi

    local found="cometbft not found"
    if [ -n "${have}" ]; then
        found="found cometbft '${have}' at $(command -v cometbft), need v${want}"
    fi
    if [ -z "${gobin}" ]; then
        echo "ensure-cometbft: ${found}, and Go is not installed." >&2
        echo "ensure-cometbft: install Go (https://go.dev/dl/), then run: ${install}" >&2
        return 1
    fi
    echo "ensure-cometbft: ${found}; running: ${install}"
    if ! go install "github.com/cometbft/cometbft/cmd/cometbft@v${want}"; then
        echo "ensure-cometbft: '${install}' failed" >&2
        return 1
    fi
    hash -r 2>/dev/null || true

    have="$(cometbft version 2>/dev/null || true)"
    if [ "${have}" != "${want}" ]; then
        echo "ensure-cometbft: installed v${want} into ${gobin}, but \`cometbft\` on PATH is" \
            "$(command -v cometbft || echo missing) reporting '${have}'; put ${gobin} first on PATH" >&2
        return 1
    fi
    echo "ensure-cometbft: using cometbft ${have} at $(command -v cometbft)"
}

_gonka_ensure_cometbft
_gonka_ensure_cometbft_rc=$?
unset -f _gonka_ensure_cometbft
if [ "${_gonka_ensure_cometbft_rc}" -ne 0 ]; then
    unset _gonka_ensure_cometbft_rc
    return 1 2>/dev/null || exit 1
fi
unset _gonka_ensure_cometbft_rc
