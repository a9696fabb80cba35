#!/bin/sh
# The fleet as n `run --target --shard i/n` processes vs one process, the
# same 30,000 requests (1,000 clients × 30, no think time, every answer
# 200) against one `serve` stub, all on this machine, every process
# starting at one --epoch. Prints, per round and n, the slowest process's
# run time (from the epoch to its stop) and the CPU time (user + sys) of
# the fleet's processes together. Run from anywhere: sh docs/benchmarks/shards.sh
set -e
cd "$(dirname "$0")/../.."
go build -o /tmp/retrylab ./cmd/retrylab
cat > /tmp/bench-ok.yaml <<'Y'
name: bench-ok
duration: 60s
server: {phases: [{name: ok, respond: ok}]}
fleet: {clients: 1000, requests: 30, start: burst, timeout: 30s}
subject: {name: no-retry}
Y
/tmp/retrylab serve --scenario /tmp/bench-ok.yaml --addr 127.0.0.1:18801 --duration 30m >/dev/null & stub=$!
sleep 1
runs() {
  n=$1; epoch=$(date -u -d '+2 sec' +%FT%T.%NZ); rm -rf /tmp/shardbench; pids=""
  for i in $(seq 0 $((n-1))); do
    if [ "$n" = 1 ]; then sh=""; else sh="--shard $i/$n"; fi
    /usr/bin/time -f "cpu %U %S" -o /tmp/shardbench-$n-$i.cpu /tmp/retrylab run /tmp/bench-ok.yaml \
      --target http://127.0.0.1:18801 --epoch "$epoch" $sh --quiet --out /tmp/shardbench > /tmp/shardbench-$n-$i.out &
    pids="$pids $!"
  done
  wait $pids
  grep -h 'run time' /tmp/shardbench-$n-*.out | sed 's/.*run time: \([0-9.]*\)\(m\?s\).*/\1 \2/' |
    awk '{t=$1; if ($2=="ms") t/=1000; if (t>m) m=t} END {printf "%.3f s", m}'
  cat /tmp/shardbench-$n-*.cpu | awk '{c+=$2+$3} END {printf ", fleet CPU %.2f s", c}'
}
for k in 1 2 3 4 5; do
  for n in 1 2 4; do echo "round $k shards $n: $(runs $n)"; done
done
kill -INT $stub; wait $stub || true
