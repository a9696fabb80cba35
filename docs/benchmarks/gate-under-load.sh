#!/bin/sh
# The gate under load: verdicts of our client and the controls on the
# built-ins that judge time windows, in real time, at three load levels:
# quiet (no hog), 2x and 8x the cores of spinning processes beside them.
# Each hog is `timeout`-bounded and killed when its level ends.
# Prints one line per run: level scenario subject seed verdict noise-p99
# failed-checks and the first INCONCLUSIVE reasons; then a tally per level, scenario and subject.
# Usage: sh docs/benchmarks/gate-under-load.sh [RUNS] [LEVELS] [SCENARIOS] [SUBJECTS]
# With KEEP=DIR each run's timeline is kept as DIR/L<level>-<scenario>-<subject>-<seed>.ndjson,
# for docs/benchmarks/gate-reanalyze.sh to judge again with another analyzer.
set -e
cd "$(dirname "$0")/../.."
runs=${1:-10}
levels=${2:-"0 2 8"}
scens=${3:-"outage-bare outage-delta flapping metastable"}
subjs=${4:-"retrylab exp-no-jitter no-retry no-backoff"}
go build -o /tmp/retrylab-gate ./cmd/retrylab
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$out"' EXIT
for level in $levels; do
  hogs=""
  n=$((level * $(nproc)))
  for _ in $(seq 1 "$n"); do
    timeout 3600 sh -c 'while :; do :; done' & hogs="$hogs $!"
  done
  for sc in $scens; do
    for subj in $subjs; do
      for seed in $(seq 1 "$runs"); do
        rm -rf "$out/run"
        set +e
        /tmp/retrylab-gate run "$sc" --subject "$subj" --seed "$seed" --quiet --no-report --out "$out/run" --json "$out/v.json" >/dev/null 2>&1
        rc=$?
        set -e
        case $rc in 0) v=PASS ;; 1) v=FAIL ;; 3) v=INCONCLUSIVE ;; *) v="ERROR($rc)" ;; esac
        tl=$(ls "$out"/run/*/timeline.ndjson 2>/dev/null | head -1)
        p99=$(tail -1 "$tl" 2>/dev/null | sed -n 's/.*"noise":{[^}]*"p99":\([0-9]*\).*/\1/p')
        failed=$(tr -d ' \n' < "$out/v.json" 2>/dev/null | tr '{' '\n' | grep '"status":"fail"' | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | tr '\n' ',')
        why=$(tr -d '\n' < "$out/v.json" 2>/dev/null | grep -o '"inconclusive": *\[[^]]*\]' | cut -c1-300)
        load=$(cut -d' ' -f1 /proc/loadavg)
        if [ -n "$KEEP" ] && [ -n "$tl" ]; then mkdir -p "$KEEP"; cp "$tl" "$KEEP/L$level-$sc-$subj-$seed.ndjson"; fi
        echo "L$level $sc $subj $seed $v noise_p99_ms=$(( ${p99:-0} / 1000000 )) load=$load failed=$failed $why"
      done
    done
  done
  [ -n "$hogs" ] && kill $hogs 2>/dev/null || true
  wait 2>/dev/null || true
done | tee "$out/all.txt"
echo "== tally (level scenario subject: PASS FAIL INCONCLUSIVE)"
awk '{k=$1" "$2" "$3; t[k]=t[k]; c[k" "$5]++; keys[k]=1} END {for (k in keys) printf "%s: %d %d %d\n", k, c[k" PASS"], c[k" FAIL"], c[k" INCONCLUSIVE"]}' "$out/all.txt" | sort
