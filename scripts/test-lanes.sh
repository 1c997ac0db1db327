#!/usr/bin/env bash
# `make unit`: the whole pytest suite in two lanes that run side by side.
#
#   real-node lane: tests/e2e/test_real_node*.py and tests/packaging/test_image.py (one
#                   real kubelet per machine, so these stay in one process; mostly waiting
#                   on the kubelet, containerd and the pods)
#   main lane:      everything else, in the order pytest collects it, with its output live
#
# The real-node lane's output is kept in a log and printed when both lanes are done, so the
# two never interleave. The exit status is the first failing lane's (0 when both pass). An
# interrupt stops both lanes. Usage: scripts/test-lanes.sh PYTEST [PYTEST-ARGS...]
set -uo pipefail

pytest=$1
shift
tier=(tests/e2e/test_real_node*.py tests/packaging/test_image.py)
log=$(mktemp -t arkgpu-real-node-lane.XXXXXX)

"$pytest" "$@" "${tier[@]}" >"$log" 2>&1 &
tier_pid=$!
trap 'kill -INT "$tier_pid" 2>/dev/null; wait "$tier_pid"; rm -f "$log"; exit 130' INT TERM

echo "test-lanes: the real-node lane runs beside this one (pid $tier_pid); its output follows the main lane's"
"$pytest" "$@" --ignore-glob='tests/e2e/test_real_node*' --ignore=tests/packaging/test_image.py
main_rc=$?

wait "$tier_pid"
tier_rc=$?
trap - INT TERM
echo
echo "=== real-node lane (${tier[*]}) ==="
cat "$log"
rm -f "$log"
echo "test-lanes: main lane exit ${main_rc}, real-node lane exit ${tier_rc}"
if ((main_rc != 0)); then exit "$main_rc"; fi
exit "$tier_rc"
