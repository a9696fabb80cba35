#!/bin/sh
# Judges again the timelines gate-under-load.sh kept (KEEP=DIR), with the
# analyzer of this checkout: one line per timeline (level scenario subject
# seed verdict failed-checks INCONCLUSIVE reasons), then the tally per
# level, scenario and subject. The recordings stay what the host made of
# the runs; only the judgement is redone.
# Usage: sh docs/benchmarks/gate-reanalyze.sh DIR
set -e
dir=${1:?usage: gate-reanalyze.sh DIR}
cd "$(dirname "$0")/../.."
go build -o /tmp/retrylab-gate ./cmd/retrylab
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for tl in "$dir"/L*.ndjson; do
  name=$(basename "$tl" .ndjson)
  level=${name%%-*}
  seed=${name##*-}
  rest=${name#*-}; rest=${rest%-*}
  subj=""
  for s in exp-no-jitter no-retry-budget no-retry no-backoff retrylab; do
    case $rest in *-"$s") subj=$s; sc=${rest%-"$s"} ;; esac
    [ -n "$subj" ] && break
  done
  set +e
  /tmp/retrylab-gate analyze "$tl" --json "$out/v.json" >/dev/null 2>&1
  rc=$?
  set -e
  case $rc in 0) v=PASS ;; 1) v=FAIL ;; 3) v=INCONCLUSIVE ;; *) v="ERROR($rc)" ;; esac
  failed=$(tr -d ' \n' < "$out/v.json" 2>/dev/null | tr '{' '\n' | grep '"status":"fail"' | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | tr '\n' ',')
  why=$(tr -d '\n' < "$out/v.json" 2>/dev/null | grep -o '"inconclusive": *\[[^]]*\]' | cut -c1-300)
  echo "$level $sc $subj $seed $v failed=$failed $why"
done | tee "$out/all.txt"
echo "== tally (level scenario subject: PASS FAIL INCONCLUSIVE)"
awk '{k=$1" "$2" "$3; c[k" "$5]++; keys[k]=1} END {for (k in keys) printf "%s: %d %d %d\n", k, c[k" PASS"], c[k" FAIL"], c[k" INCONCLUSIVE"]}' "$out/all.txt" | sort
