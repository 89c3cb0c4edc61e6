#!/usr/bin/env bash
# Coverage-guided fuzzing of gonka-rs on the stable toolchain, with AFL++ (cargo-afl).
#
#   fuzz/run.sh [--seconds N | --execs N] [TARGET...]   fuzz each target in turn (default 20 s each)
#   fuzz/run.sh --replay [TARGET...]                    run the corpus through the bodies, uninstrumented
#   fuzz/run.sh --minimize [TARGET...]                  after a fuzz run: add the run's new finds,
#                                                       minimized with afl-cmin, to corpus/<target>/
#   fuzz/run.sh --seeds                                 rewrite the seed inputs (corpus/*/seed-*)
#
# Targets: tx_check msgs query http proof (see src/lib.rs). Each fuzz run starts from
# corpus/<target>/ and writes AFL's state to out/<target>/; per target it prints the execs,
# execs/s, the edges covered (of the map), the inputs AFL keeps, and crashes and hangs. It
# exits non-zero if any target crashed (the crashing inputs are in out/<target>/default/crashes/;
# reproduce one with `target/replay/fuzz/replay TARGET FILE`).
#
# Needs cargo-afl (`cargo install cargo-afl`, which builds AFL++ on stable Rust). Builds go to
# fuzz/target/afl (instrumented) and fuzz/target/replay (plain). Everything runs under
# `nice`, one target at a time, on one core, with the workspace's `fuzz` profile (optimised,
# debug assertions and overflow checks on). The test suite replays the corpus without
# instrumentation (fuzz/tests/corpus.rs); this script is the flagged, longer run.
set -euo pipefail

cd "$(dirname "$0")"
ALL_TARGETS=(tx_check msgs query http proof)
mode=fuzz
seconds=20
execs=
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --execs) execs="$2"; shift 2 ;;
        --replay) mode=replay; shift ;;
        --minimize) mode=minimize; shift ;;
        --seeds) mode=seeds; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

plain_build() {
    nice -n 10 cargo build --quiet --profile fuzz -p gonka-fuzz --bin replay --bin seeds --target-dir target/replay
}

case "$mode" in
    replay)
        plain_build
        exec nice -n 10 target/replay/fuzz/replay "${targets[@]}"
        ;;
    seeds)
        plain_build
        exec nice -n 10 target/replay/fuzz/seeds
        ;;
esac

if ! cargo afl --version >/dev/null 2>&1; then
    echo "cargo-afl is missing: cargo install cargo-afl" >&2
    exit 2
fi

if [ "$mode" = minimize ]; then
    # afl-cmin.bash of the AFL++ cargo-afl built (its Python afl-cmin recorded no tuples from
    # these persistent-mode targets here); -e: by edges, not hit counts, for a small corpus.
    afl_bin=$(ls -d "${XDG_DATA_HOME:-$HOME/.local/share}"/afl.rs/rustc-*/afl.rs-*/afl/bin | tail -1)
    for t in "${targets[@]}"; do
        queue="out/$t/default/queue"
        [ -d "$queue" ] || { echo "$t: no $queue; fuzz it first" >&2; exit 2; }
        tmp=$(mktemp -d)
        # The corpus plus what the run found, reduced to a set with the same edges.
        mkdir "$tmp/in"
        cp corpus/"$t"/* "$tmp/in/"
        cp "$queue"/id:* "$tmp/in/" 2>/dev/null || true
        AFL_SKIP_CPUFREQ=1 AFL_PATH="$afl_bin" PATH="$afl_bin:$PATH" nice -n 10 \
            "$afl_bin/afl-cmin.bash" -e -i "$tmp/in" -o "$tmp/min" -t 5000 -- "target/afl/fuzz/afl_$t" >"$tmp/log" 2>&1 \
            || { tail -5 "$tmp/log" >&2; exit 1; }
        added=0
        for f in "$tmp"/min/*; do
            name=$(basename "$f")
            case "$name" in seed-*|find-*) continue ;; esac
            sum=$(sha256sum "$f" | cut -c1-16)
            cp "$f" "corpus/$t/find-$sum"
            added=$((added + 1))
        done
        echo "$t: $(ls "$tmp/min" | wc -l) inputs cover the corpus and the run's queue; $added new finds added to corpus/$t/"
        rm -rf "$tmp"
    done
    exit 0
fi

build_started=$(date +%s)
nice -n 10 cargo afl build --quiet --profile fuzz -p gonka-fuzz --features afl --target-dir target/afl \
    $(printf -- '--bin afl_%s ' "${targets[@]}")
echo "instrumented build: $(( $(date +%s) - build_started )) s"

if [ -n "$execs" ]; then limit=(-E "$execs"); else limit=(-V "$seconds"); fi
failed=0
printf '%-9s %12s %9s %16s %7s %8s %6s\n' target execs execs/s edges inputs crashes hangs
for t in "${targets[@]}"; do
    rm -rf "out/$t"
    mkdir -p "out/$t"
    # No UI, no CPU pinning (a shared machine), no checks of the host's crash handler or
    # CPU governor; -t: the first input of each persistent process builds the fixture chain.
    AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
        AFL_FAST_CAL=1 \
        nice -n 10 cargo afl fuzz -i "corpus/$t" -o "out/$t" -t 5000 "${limit[@]}" \
        -- "target/afl/fuzz/afl_$t" >"out/$t/fuzz.log" 2>&1 || {
        echo "$t: afl-fuzz failed; see fuzz/out/$t/fuzz.log" >&2
        tail -20 "out/$t/fuzz.log" >&2
        failed=1
        continue
    }
    stats="out/$t/default/fuzzer_stats"
    stat() { sed -n "s/^$1 *: *//p" "$stats"; }
    crashes=$(stat saved_crashes)
    run_time=$(stat run_time)
    done_execs=$(stat execs_done)
    rate=$(( done_execs / (run_time > 0 ? run_time : 1) ))
    printf '%-9s %12s %9s %16s %7s %8s %6s\n' "$t" "$done_execs" "$rate" \
        "$(stat edges_found)/$(stat total_edges)" "$(stat corpus_count)" "$crashes" "$(stat saved_hangs)"
    if [ "${crashes:-0}" != 0 ]; then
        echo "$t: CRASHES in fuzz/out/$t/default/crashes/" >&2
        failed=1
    fi
done
exit $failed
