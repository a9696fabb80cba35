#!/bin/sh
# The examples as a user runs them heaviest: 50 one-client processes of
# the Python and the Node example on 2 cores, the good policy and each
# mistake on its own scenario, RUNS times each (seeds 1..RUNS). Prints one
# line per run: language policy scenario seed verdict failed-checks
# undecided-checks; then a tally.
# Usage: sh docs/benchmarks/examples-under-load.sh [RUNS]
set -e
cd "$(dirname "$0")/../.."
runs=${1:-10}
go build -o /tmp/retrylab-examples ./cmd/retrylab
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
py=/usr/bin/python3
[ -x "$py" ] || py=python3
for lang in python node; do
  case $lang in
    python) cmd="$py examples/python/client.py" ;;
    node) cmd="node examples/node/client.mjs" ;;
  esac
  for row in "good outage" "good bare" "ignore-retry-after outage" "retry-4xx not-found" "no-jitter bare" "no-backoff bare"; do
    set -- $row
    pol=$1 sc=$2
    args=""
    [ "$pol" = good ] || args="--mistake $pol"
    n=$runs
    [ "$pol" = good ] && n=$(( (runs + 1) / 2 ))
    for seed in $(seq 1 "$n"); do
      set +e
      /tmp/retrylab-examples run "examples/scenarios/$sc.yaml" --subject "exec:$cmd $args" --clients 50 --seed "$seed" \
        --quiet --no-report --out "$out/run" --json "$out/v.json" >/dev/null 2>&1
      rc=$?
      set -e
      case $rc in 0) v=PASS ;; 1) v=FAIL ;; 3) v=INCONCLUSIVE ;; *) v="ERROR($rc)" ;; esac
      flat=$(tr -d ' \n' < "$out/v.json" 2>/dev/null | tr '{' '\n')
      failed=$(echo "$flat" | grep '"status":"fail"' | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | tr '\n' ',')
      open=$(echo "$flat" | grep '"status":"inconclusive"' | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | tr '\n' ',')
      echo "$lang $pol $sc $seed $v failed=$failed undecided=$open"
      rm -rf "$out/run"
    done
  done
done
