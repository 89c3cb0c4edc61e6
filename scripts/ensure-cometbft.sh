# shellcheck shell=bash
# Makes `cometbft` v0.38.25 with gonka's patches (`cometbft version` says 0.38.25+gonka.1)
# available on PATH. Meant to be sourced:
#
#     source scripts/ensure-cometbft.sh
#
# Puts Go's install directory ($(go env GOBIN), else the first entry of $(go env GOPATH) + /bin)
# on PATH, and if `cometbft` is missing or is another build, builds it there: the v0.38.25
# module from Go's module proxy (`go mod download`), the patches in scripts/cometbft/ applied
# (see each patch's header for what it fixes and why), then `go build ./cmd/cometbft` with the
# build tag `gonka.1` in its version. Prints what it does. Returns non-zero (never exits the
# sourcing shell) on failure.

_gonka_ensure_cometbft() {
    local release="0.38.25"
    local want="${release}+gonka.1"
    local patches
    patches="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cometbft"
    local install="source scripts/ensure-cometbft.sh"

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
        found="found cometbft '${have}' at $(command -v cometbft), need ${want}"
    fi
    if [ -z "${gobin}" ]; then
        echo "ensure-cometbft: ${found}, and Go is not installed." >&2
        echo "ensure-cometbft: install Go (https://go.dev/dl/), then run: ${install}" >&2
        return 1
    fi
    echo "ensure-cometbft: ${found}; building v${release} with the patches in ${patches}"
    local source
    source="$(go mod download -json "github.com/cometbft/cometbft@v${release}" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    if [ -z "${source}" ] || [ ! -d "${source}" ]; then
        echo "ensure-cometbft: 'go mod download github.com/cometbft/cometbft@v${release}' failed" >&2
        return 1
    fi
    local build
    build="$(mktemp -d)"
    if ! (cp -R "${source}/." "${build}" && chmod -R u+w "${build}"); then
        echo "ensure-cometbft: copying ${source} to ${build} failed" >&2
        rm -rf "${build}"
        return 1
    fi
    local patch
    for patch in "${patches}"/*.patch; do
        echo "ensure-cometbft: applying $(basename "${patch}")"
        if ! (cd "${build}" && git apply "${patch}"); then
            echo "ensure-cometbft: ${patch} does not apply to cometbft v${release}" >&2
            rm -rf "${build}"
            return 1
        fi
    done
    mkdir -p "${gobin}"
    if ! (cd "${build}" && go build -trimpath \
        -ldflags "-X github.com/cometbft/cometbft/version.TMGitCommitHash=${want#*+}" \
        -o "${gobin}/cometbft" ./cmd/cometbft); then
        echo "ensure-cometbft: building cometbft in ${build} failed" >&2
        rm -rf "${build}"
        return 1
    fi
    rm -rf "${build}"
    hash -r 2>/dev/null || true

    have="$(cometbft version 2>/dev/null || true)"
    if [ "${have}" != "${want}" ]; then
        echo "ensure-cometbft: installed ${want} into ${gobin}, but \`cometbft\` on PATH is" \
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
