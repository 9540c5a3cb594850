#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs examples/serve_example (kiln serve on the trained digit model + the C++ client over HTTP,
# then over gRPC, then PNG bytes through the chain digits_chain over both) and checks, for each
# run, that every held-out image got a prediction and that the accuracy is at least 90%.
# Usage: serve_example_test.sh PATH/TO/kiln PATH/TO/classify_digits
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
examples=$here/../../examples
rc=0
out=$("$examples/serve_example" "$1" "$2" 2>&1) || rc=$?
((rc == 0)) || { echo "$out"; echo "FAIL: serve_example exited $rc"; exit 1; }
echo "$out"
images=$(grep -cv '^#' "$examples/digit_images/labels.txt")
predicted=$(grep -cE '^[0-9]+_label[0-9]\.pgm +[0-9] ' <<<"$out" || true)
[[ $predicted -eq $((4 * images)) ]] ||
  { echo "FAIL: $predicted predictions for $images images over 2 protocols x 2 models"; exit 1; }
for model in digits digits_chain; do
  for protocol in http grpc; do
    grep -q "^model $model over $protocol at" <<<"$out" || { echo "FAIL: no $model $protocol run"; exit 1; }
  done
done
runs=0
while read -r correct total percent; do
  [[ $total -eq $images ]] || { echo "FAIL: an accuracy line for $total of $images images"; exit 1; }
  ((correct * 10 >= total * 9)) || { echo "FAIL: accuracy $percent% is below 90%"; exit 1; }
  runs=$((runs + 1))
done < <(sed -n 's|^accuracy: \([0-9]*\)/\([0-9]*\) = \([0-9.]*\)%$|\1 \2 \3|p' <<<"$out")
((runs == 4)) || { echo "FAIL: $runs accuracy lines, expected one per protocol and model"; exit 1; }
[[ $(grep -c 'predictions match the sequential ones' <<<"$out") -eq 4 ]] ||
  { echo "FAIL: a concurrent run is missing"; exit 1; }
grep -q 'kiln serve exited with status 0' <<<"$out" || { echo "FAIL: the server did not stop cleanly"; exit 1; }
echo "PASS: $images images classified over HTTP and gRPC, as pixels and as PNG bytes through the chain, each at least 90% accurate"
