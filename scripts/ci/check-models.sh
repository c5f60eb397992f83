#!/usr/bin/env bash
# Model-checks the cross-host protocols of the PostgreSQL store with spin (models/*.pml; what each
# model action stands for is in docs/ARCHITECTURE.md, "Model-checked cross-host protocols"):
# the PIN attempt ledger, the fenced refresh lease, the conditional PIN change and the first write
# of a device ID, each with host crashes and a failover to the synchronous standby at every step.
# Each model is searched exhaustively within its bounds and must hold; each mutant (the model with
# one key step of the protocol removed, chosen with spin's preprocessor, -DNAME) must FAIL, so a
# check that could not fail is noticed; a "known gap" is a property the protocol does not have
# (docs/ARCHITECTURE.md says why), searched so that a fix is noticed. Installs spin (Debian's
# package) if it is missing. About 35 s in all on a busy two-core machine, most of it compiling.
#
# Usage: scripts/ci/check-models.sh [-v]
#   -v  print the counterexample (spin -t) of every failed search, expected or not
# Exits 0 when every model holds and every mutant fails, 1 otherwise, 2 if it cannot run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
models="$here/../../models"
verbose=0
[[ "${1:-}" == "-v" ]] && verbose=1

if ! command -v spin >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
        echo "check-models: spin is missing; install it as root: apt-get install spin" >&2
        exit 2
    fi
    echo "check-models: installing spin" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends spin >/dev/null 2>&1 || {
        "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq --no-install-recommends spin >/dev/null
    } || { echo "check-models: could not install spin (apt-get install spin)" >&2; exit 2; }
fi
cc="${CC:-cc}"
command -v "$cc" >/dev/null 2>&1 || { echo "check-models: no C compiler ($cc) to build spin's verifier" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/lockbox-models.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# model | defines | expect (holds / fails) | what the run shows
runs=(
    "pin_ledger|-|holds|every evaluated guess is counted"
    "pin_ledger|-DCOMPARE_BEFORE_COUNT|fails|mutant: the hash compared before the guess is counted"
    "pin_ledger|-DACT_BEFORE_COMMIT|fails|mutant: begin_pin_attempt's row acted on before COMMIT"
    "pin_ledger|-DNO_ROW_LOCK|fails|mutant: the count read without FOR UPDATE"
    "pin_ledger|-DNO_WIPE_LIMIT|fails|mutant: the ledger refuses only from the disable limit"
    "refresh_lease|-|holds|one endpoint call per lease; a stalled holder stores nothing"
    "refresh_lease|-DNO_FENCE|fails|mutant: the lease row deleted without its fence"
    "refresh_lease|-DTAKE_LIVE|fails|mutant: a live lease taken over (no expiry check)"
    "refresh_lease|-DACT_BEFORE_COMMIT|fails|mutant: the lease taken from RETURNING before COMMIT"
    "pin_change|-|holds|no PIN change is undone"
    "pin_change|-DNO_COMPARE|fails|mutant: the record written without the compare"
    "pin_change|-DACT_BEFORE_COMMIT|fails|mutant: success reported before COMMIT"
    "first_write|-|holds|one device ID, and it survives"
    "first_write|-DOVERWRITE|fails|mutant: ON CONFLICT DO UPDATE instead of DO NOTHING"
    "first_write|-DACT_BEFORE_COMMIT|fails|mutant: the ID returned before COMMIT"
    "first_write|-DCANCELLED_WAIT|fails|known gap: a cancelled wait shows an unreplicated row"
)

failures=0
n=0
printf '%-14s %-22s %-6s %-8s %10s %6s  %s\n' model variant expect result states secs what
for run in "${runs[@]}"; do
    IFS='|' read -r model defines expect what <<<"$run"
    [[ "$defines" == "-" ]] && defines=""
    n=$((n + 1))
    dir="$work/$n-$model"
    mkdir -p "$dir"
    cp "$models/$model.pml" "$dir/"
    start=$SECONDS
    # The searches that must hold explore every state: an optimised verifier pays for its longer
    # compile. A mutant's search stops at its first counterexample: compiled fast.
    optimise=-O0
    [[ "$expect" == "holds" ]] && optimise=-O1
    result="error"
    states="-"
    (
        cd "$dir"
        # shellcheck disable=SC2086
        spin -a $defines "$model.pml" >spin.log 2>&1 &&
            "$cc" "$optimise" -w -DSAFETY -DCOLLAPSE -DMEMLIM=1024 -o pan pan.c >cc.log 2>&1 &&
            timeout 120 ./pan -m200000 -w22 >pan.log 2>&1
    ) || true
    log="$dir/pan.log"
    if [[ -s "$log" ]]; then
        states="$(awk '/states, stored/ { print $1; exit }' "$log")"
        if grep -q "assertion violated" "$log"; then
            result="fails"
        elif grep -q "out of memory\|max search depth too small\|Search not completed" "$log"; then
            result="incomplete"   # a bound was hit: nothing is proved
        elif grep -q "errors: 0" "$log"; then
            result="holds"
        fi
    fi
    if [[ "$result" == "$expect" ]]; then verdict="ok"; else verdict="WRONG"; failures=$((failures + 1)); fi
    printf '%-14s %-22s %-6s %-8s %10s %6s  %s%s\n' "$model" "${defines:-(protocol)}" "$expect" "$result" "${states:--}" \
        "$((SECONDS - start))" "$what" "$([[ $verdict == ok ]] || echo "  <-- expected $expect")"
    if [[ "$result" == "error" ]]; then
        { cat "$dir/spin.log" "$dir/cc.log" "$log" 2>/dev/null || true; } | tail -20 >&2
    fi
    if [[ "$result" == "fails" && ( $verbose == 1 || $verdict != ok ) ]]; then
        grep "assertion violated" "$log" >&2 || true
        # shellcheck disable=SC2086
        (cd "$dir" && spin -t -p -g $defines "$model.pml" 2>&1 | tail -80) >&2 || true
    fi
    if [[ "$result" == "holds" && "$expect" == "fails" && "$what" == known* ]]; then
        echo "check-models: the known gap above no longer shows; update docs/ARCHITECTURE.md and move the check to the ones that must hold" >&2
    fi
done

if ((failures > 0)); then
    echo "check-models: $failures of ${#runs[@]} searches did not end as expected" >&2
    exit 1
fi
echo "check-models: every model holds within its bounds and every mutant fails (${#runs[@]} searches)"
