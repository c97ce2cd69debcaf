#!/usr/bin/env bash
# The static checks `npm test` runs before jest: the type-check beside the type-aware ESLint (the two longest, one
# core each), then the layer rules and Prettier's check. Each one's output is printed whole, in order; any failure fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
tsc='' eslint=''
# An interrupted run leaves neither check running behind it.
trap 'kill $tsc $eslint 2>/dev/null; rm -rf "$out"' EXIT
./node_modules/.bin/tsc --noEmit >"$out/typecheck" 2>&1 &
tsc=$!
./node_modules/.bin/eslint . >"$out/eslint" 2>&1 &
eslint=$!
failed=()
wait $tsc || failed+=(typecheck)
npm run --silent layers >"$out/layers" 2>&1 || failed+=(layers)
npm run --silent format:check >"$out/format" 2>&1 || failed+=(format)
wait $eslint || failed+=(eslint)
for check in typecheck eslint layers format; do
  if [ -s "$out/$check" ]; then echo "── $check"; cat "$out/$check"; fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "checks failed: ${failed[*]}" >&2
  exit 1
fi
echo "checks passed: typecheck, eslint, layers, format"
