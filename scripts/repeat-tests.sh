#!/usr/bin/env bash
# Run pytest over PATHS N times, each time under two CPU-burning processes (as on a busy CI
# node during a rollout), then print how often each test failed: a test that fails once in N
# is flaky, and a suite that is never flaky shows none.
#
#   scripts/repeat-tests.sh N PYTEST PATHS...      e.g. 5 .venv/bin/pytest tests/lab
set -uo pipefail

count=${1:?usage: repeat-tests.sh N PYTEST PATHS...}
pytest=${2:?usage: repeat-tests.sh N PYTEST PATHS...}
shift 2
[ "$#" -gt 0 ] || { echo "repeat-tests.sh: no test paths" >&2; exit 2; }
here=$(dirname "$0")

logs=$(mktemp -d -t repeat-tests.XXXXXX)
for run in $(seq "$count"); do
    echo "== run $run of $count: $*"
    # -rfE: one `FAILED test` / `ERROR test` line per failure, which the tally below counts.
    "$here/with-cpu-burners.sh" 2 "$pytest" -q -rfE -p no:cacheprovider "$@" \
        > "$logs/run-$run.log" 2>&1
    echo "   exit $?; $(tail -n 1 "$logs/run-$run.log")"
done

echo "== failures per test over $count runs"
failed=$(sed -n 's/^\(FAILED\|ERROR\) \([^ ]*\).*/\2/p' "$logs"/run-*.log | sort | uniq -c)
if [ -z "$failed" ]; then
    echo "none"
    rm -rf "$logs"
    exit 0
fi
echo "$failed" | sort -rn | awk -v n="$count" '{ print "  " $2 ": failed " $1 " of " n }'
# A failure once in N is the one to read: its whole output stays.
echo "== the failed runs' logs: $(grep -lE '^(FAILED|ERROR) ' "$logs"/run-*.log | tr '\n' ' ')"
exit 1
