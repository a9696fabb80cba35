#!/bin/sh
# exec: many clients per process. Runs the exec-many scenario with the
# Python and the Node client of this directory, one process per client
# against PROCS processes (fleet.processes), RUNS times each, the modes
# interleaved, niced. Prints one line per run:
#   lang mode run barrier_ms cpu_s noise_p50_ms noise_p90_ms noise_p99_ms fleet_ready verdict
# barrier_ms: from the command's start to meta.start (time zero: the start
# barrier opened); cpu_s: user+system CPU of retrylab and every process it
# ran (GNU time); noise: the end record's; fleet_ready: end.fleet_ready
# (1: every process was ready when the barrier opened, 0: unknown).
# Then the medians per language and mode.
# Usage: sh docs/benchmarks/exec-many/bench.sh [RUNS] [CLIENTS] [PROCS] [LANGS] [MODES]
#   MODES: "per-client" and/or "procs"
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
runs=${1:-3}
clients=${2:-100}
procs=${3:-4}
langs=${4:-"python node"}
modes=${5:-"per-client procs"}
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
nice -n 19 go build -o /tmp/retrylab-exec-many ./cmd/retrylab
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sed "s/clients: 100/clients: $clients/" "$here/scenario.yaml" > "$out/per-client.yaml"
sed "s/clients: 100, requests: 3, timeout: 10s/clients: $clients, requests: 3, timeout: 10s, processes: $procs/" "$here/scenario.yaml" > "$out/procs.yaml"
for run in $(seq 1 "$runs"); do
  for lang in $langs; do
    case $lang in
      python) subj="exec:$py $here/client.py" ;;
      node) subj="exec:node $here/client.mjs" ;;
    esac
    for mode in $modes; do
      rm -rf "$out/run"
      t0=$(date +%s%N)
      set +e
      /usr/bin/time -f '%U %S' -o "$out/time" nice -n 19 /tmp/retrylab-exec-many run "$out/$mode.yaml" \
        --subject "$subj" --quiet --no-report --out "$out/run" >/dev/null 2>&1
      rc=$?
      set -e
      case $rc in 0) v=PASS ;; 1) v=FAIL ;; 3) v=INCONCLUSIVE ;; *) v="ERROR($rc)" ;; esac
      tl=$(ls "$out"/run/*/timeline.ndjson | head -1)
      start=$(head -1 "$tl" | grep -o '"start":"[0-9][0-9][0-9][0-9]-[^"]*"' | head -1 | cut -d\" -f4)
      barrier=$(( ($(date -d "$start" +%s%N) - t0) / 1000000 ))
      end=$(tail -1 "$tl")
      q() { echo "$end" | sed -n "s/.*\"noise\":{[^}]*\"$1\":\([0-9]*\).*/\1/p"; }
      ready=$(echo "$end" | sed -n 's/.*"fleet_ready":\([0-9]*\).*/\1/p')
      cpu=$(tail -1 "$out/time" | awk '{printf "%.2f", $1 + $2}')
      m=$mode; [ "$mode" = procs ] && m="${procs}procs"
      echo "$lang $m $run $barrier $cpu $(( $(q p50) / 1000000 )) $(( $(q p90) / 1000000 )) $(( $(q p99) / 1000000 )) ${ready:-0} $v"
    done
  done
done | tee "$out/all.txt"
echo "== medians (lang mode: barrier_ms cpu_s noise_p90_ms noise_p99_ms; verdicts)"
for key in $(awk '{print $1"/"$2}' "$out/all.txt" | sort -u); do
  lang=${key%/*} mode=${key#*/}
  med() { awk -v l="$lang" -v m="$mode" -v c="$1" '$1==l && $2==m {print $c}' "$out/all.txt" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  vs=$(awk -v l="$lang" -v m="$mode" '$1==l && $2==m {print $10}' "$out/all.txt" | sort | uniq -c | awk '{printf "%s%s %s", s, $1, $2; s=", "}')
  echo "$lang $mode: $(med 4) $(med 5) $(med 7) $(med 8); $vs"
done
