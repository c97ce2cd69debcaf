#!/usr/bin/env bash
# `npm test`: the static checks (scripts/checks.sh) run beside jest rather than before it. jest's stack files wait on
# servers and timers much of the time (the run keeps about 1.3 of 2 cores busy), and the checks fill that room instead
# of adding their 35 s. Either failing fails the run; the checks' report prints when they end. Arguments go to jest.
set -uo pipefail
cd "$(dirname "$0")/.."
nice -n 19 bash scripts/checks.sh &
checks=$!
trap 'kill $checks 2>/dev/null' EXIT
npx jest --maxWorkers=2 "$@"
tests=$?
wait $checks
checked=$?
trap - EXIT
if [ $checked -ne 0 ]; then echo "npm test: the static checks failed (above)" >&2; fi
if [ $tests -ne 0 ]; then echo "npm test: jest failed" >&2; fi
[ $tests -eq 0 ] && [ $checked -eq 0 ]
