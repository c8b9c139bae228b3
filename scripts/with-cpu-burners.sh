#!/usr/bin/env bash
# Run a command with N processes burning a CPU each beside it, as on a busy CI node during a
# rollout; the burners are stopped however the command ends.
#
#   scripts/with-cpu-burners.sh N COMMAND [ARGS...]
set -euo pipefail

count=${1:?usage: with-cpu-burners.sh N COMMAND [ARGS...]}
shift
[ "$#" -gt 0 ] || { echo "with-cpu-burners.sh: no command to run" >&2; exit 2; }

burners=()
stop_burners() {
    [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null || true
}
trap stop_burners EXIT INT TERM

for _ in $(seq "$count"); do
    python3 -c 'while True: pass' &
    burners+=("$!")
done
echo "with-cpu-burners: ${#burners[@]} CPU-burning processes (pids ${burners[*]}) beside: $*"
"$@"
