#!/usr/bin/env bash
# Run `prober lab --check` N times for each PLATFORM/SCENARIO beside two CPU-burning processes
# (as on a busy CI node during a rollout) and print each run's verdict line and its CHECK
# lines: a check that fails when the measurement is right shows here. A failed run's folder is
# kept for reading; a passed one's is removed. Exit 1 if any run's check failed.
#
#   scripts/repeat-lab.sh N PROBER 'aws/rollout gcp/node-loss' [LAB ARGS...]
set -uo pipefail

count=${1:?usage: repeat-lab.sh N PROBER CASES [LAB ARGS...]}
prober=${2:?usage: repeat-lab.sh N PROBER CASES [LAB ARGS...]}
cases=${3:?usage: repeat-lab.sh N PROBER CASES [LAB ARGS...]}
shift 3
here=$(dirname "$0")
runs=$(mktemp -d -t repeat-lab.XXXXXX)

repeat() {
    local count=$1 prober=$2 cases=$3 runs=$4 failed=0 total=0 case platform scenario run out code
    shift 4
    for case in $cases; do
        platform=${case%%/*}
        scenario=${case#*/}
        for run in $(seq "$count"); do
            total=$((total + 1))
            out="$runs/$total-$platform-$scenario"
            "$prober" lab --check --platform "$platform" --scenario "$scenario" --out "$out" "$@" \
                > "$out.log" 2>&1
            code=$?
            printf '%-22s %2d/%d exit %d: %s\n' "$platform/$scenario" "$run" "$count" "$code" \
                "$(grep -m1 '^prober lab: measurement' "$out.log" || tail -n 1 "$out.log")"
            grep '^CHECK ' "$out.log" | sed 's/^/    /'
            # How each watch was paired with its server's (`lab.judges.watchpairs`), by count.
            [ -f "$out/lab-result.json" ] && printf '    watches paired by: %s\n' "$(
                grep -o '"paired_by": "[a-z-]*"' "$out/lab-result.json" | cut -d'"' -f4 |
                    sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')"
            if [ "$code" -ne 0 ]; then
                failed=$((failed + 1))
            else
                rm -rf "$out" "$out.log"
            fi
        done
    done
    if [ "$failed" -eq 0 ]; then
        echo "== 0 of $total runs failed their check"
        rm -rf "$runs"
        return 0
    fi
    echo "== $failed of $total runs failed their check; their folders are in $runs"
    return 1
}

export -f repeat
exec "$here/with-cpu-burners.sh" 2 bash -c 'repeat "$@"' repeat "$count" "$prober" "$cases" "$runs" "$@"
