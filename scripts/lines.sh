#!/usr/bin/env bash
# Product lines as issue 35 counts them: every line of src/, the checkout's share (its workflow, activities,
# contract, CLI, store, facts and schema), and the largest files.
set -euo pipefail
cd "$(dirname "$0")/.."
total=$(find src -name '*.ts' -print0 | xargs -0 cat | wc -l)
files=$(ls src/workflows/checkout/*.ts src/activities/checkout*.ts src/contract/checkout.ts src/cli/checkout.ts \
  src/store/checkouts.ts src/inspect/checkout-facts.ts)
schema=$(awk '/^export const CHECKOUT = /{on=1} on{n++} on&&/`;$/{on=0} END{print n}' src/store/schema.ts)
checkout=$(( $(cat $files | wc -l) + schema ))
echo "src/: $total lines in $(find src -name '*.ts' | wc -l) files"
echo "checkout: $checkout lines (schema $schema, $(echo "$files" | wc -l) files)"
echo "largest:"; find src -name '*.ts' -print0 | xargs -0 wc -l | sort -rn | sed -n '2,6p'
