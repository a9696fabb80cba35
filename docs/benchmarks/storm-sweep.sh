#!/bin/sh
# Every subject on the two storm built-ins, metastable-open and metastable,
# in real time, seed 1, one run at a time: a Markdown row per run with the
# verdict, load-amplification and recovery (figure and status).
# Usage: sh docs/benchmarks/storm-sweep.sh [SEED]
set -e
seed=${1:-1}
cd "$(dirname "$0")/../.."
go build -o /tmp/retrylab-sweep ./cmd/retrylab
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| scenario | subject | verdict | load-amplification | recovery |"
echo "|---|---|---|---|---|"
subjects=$(/tmp/retrylab-sweep subjects | awk 'NR > 1 {print $1}')
for sc in metastable-open metastable; do
  for s in $subjects; do
    rm -rf "$out/run" "$out/v.json"
    set +e
    /tmp/retrylab-sweep run "$sc" --subject "$s" --seed "$seed" --quiet --no-report --out "$out/run" --json "$out/v.json" >/dev/null 2>&1
    set -e
    python3 - "$sc" "$s" "$out/v.json" <<'PY'
import json, sys
sc, s, path = sys.argv[1:]
try:
    v = json.load(open(path))
except (OSError, ValueError):
    print(f"| {sc} | {s} | no verdict | | |")
    sys.exit()
f = {c["id"]: c for c in v["checks"]}
def cell(id, unit):
    c = f.get(id)
    if not c or c["status"] == "skip":
        return "skip"
    return f"{c.get('figure', 0):.2f}{unit} ({c['status']})"
print(f"| {sc} | {s} | {v['verdict'].upper()} | {cell('load-amplification', '×')} | {cell('recovery', ' s')} |")
PY
  done
done
