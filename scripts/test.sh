#!/usr/bin/env bash
# `npm test`: the static checks (scripts/checks.sh) run beside jest rather than before it, at the lowest CPU priority.
# jest's stack files wait on servers and timers much of the time (the run keeps about 1.3 of 2 cores busy), and the
# checks take that room instead of adding their 35 s; at normal priority they slowed jest's first, heaviest files.
# Either failing fails the run; the checks' report prints when they end. Arguments go to jest.
set -uo pipefail
cd "$(dirname "$0")/.."
nice -n 19 bash scripts/checks.sh &
checks=$!
# Three jest workers on two cores: two left about a third of the CPU idle while files wait on servers and timers.
./node_modules/.bin/jest --maxWorkers=3 "$@" &
tests=$!
# Interrupted or terminated, nothing is left running: jest, and the checks (whose own trap stops tsc and eslint).
trap 'kill $checks $tests 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
wait $tests
tested=$?
wait $checks
checked=$?
trap - EXIT
if [ $checked -ne 0 ]; then echo "npm test: the static checks failed (above)" >&2; fi
if [ $tested -ne 0 ]; then echo "npm test: jest failed" >&2; fi
[ $tested -eq 0 ] && [ $checked -eq 0 ]
