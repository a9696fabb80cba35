#!/bin/sh
# curl --retry against `retrylab serve`, judged through its control API.
#   sh examples/shell/test.sh        (retrylab on PATH, or RETRYLAB=path)
# What it shows: curl --retry honours Retry-After (both forms) and leaves
# 404 alone: PASS; --retry-all-errors retries the 404: FAIL non-retryable;
# without a Retry-After, curl's backoff (1 s, 2 s, ... no jitter) brings a
# fleet back in lockstep: FAIL waves. Exits 0 when every case holds, 1 when
# one does not, 77 (skipped) when retrylab or curl is missing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
scenarios=$here/../scenarios
retrylab=${RETRYLAB:-retrylab}
skip() {
  if [ "${CI:-}" = true ]; then echo "FAIL: $1 (CI=true: not skipped)"; exit 1; fi
  echo "SKIP: $1"; exit 77
}
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v "$retrylab" >/dev/null 2>&1 || skip "$retrylab not found: put retrylab on PATH or set RETRYLAB"

tmp=$(mktemp -d)
trap 'kill -INT $serve 2>/dev/null; wait $serve 2>/dev/null; rm -rf "$tmp"' EXIT
# Port 0: the OS picks a free port; serve prints the URL on its first line:
#   retrylab: serving "default" on http://127.0.0.1:41234
"$retrylab" serve --addr 127.0.0.1:0 --duration 10m >"$tmp/serve.out" 2>&1 &
serve=$!
i=0
until base=$(sed -n 's/^retrylab: serving .* on \(http:[^ ]*\).*/\1/p' "$tmp/serve.out") && [ -n "$base" ]; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 $serve 2>/dev/null; then echo "serve did not start:"; cat "$tmp/serve.out"; exit 1; fi
  sleep 0.1
done

# reset SCENARIO: a fresh recording (and phase clock) with a scenario file.
reset() {
  curl -sS --fail-with-body -X POST -H 'Content-Type: application/yaml' \
    --data-binary "@$scenarios/$1.yaml" "$base/_retrylab/reset" >/dev/null
}
# fleet CLIENTS REQUESTS CURL-ARGS...: each client's requests in turn, the
# clients at once.
fleet() {
  clients=$1 requests=$2; shift 2
  c=0 pids=
  while [ $c -lt "$clients" ]; do
    (r=0; while [ $r -lt "$requests" ]; do
      curl -sS --fail "$@" "$base/c/$c/r/$r" >/dev/null 2>&1
      r=$((r + 1))
    done) &
    pids="$pids $!"
    c=$((c + 1))
  done
  for p in $pids; do wait "$p"; done
}
# expect VERDICT [CHECK]: the verdict, and CHECK among the failed checks.
failures=0
expect() {
  curl -sS --fail "$base/_retrylab/verdict" >"$tmp/v.json" || { echo "FAIL: no verdict"; failures=$((failures + 1)); return; }
  verdict=$(sed -n 's/^  "verdict": "\([a-z]*\)".*/\1/p' "$tmp/v.json")
  failed=$(awk -F'"' '/"id":/ {id=$4} /"status": "fail"/ {print id}' "$tmp/v.json" | tr '\n' ' ')
  if [ "$verdict" = "$1" ] && { [ $# -lt 2 ] || case " $failed" in *" $2 "*) true ;; *) false ;; esac; }; then
    echo "ok: $case_name: $verdict${2:+ ($2)}"
  elif [ "$verdict" = inconclusive ] && grep -q "noise" "$tmp/v.json"; then
    # The host was too loaded to judge: noise never passes or fails a case.
    echo "noise: $case_name: inconclusive (the host's noise), not judged"
  else
    echo "FAIL: $case_name: verdict $verdict, failed checks [$failed]; want $1${2:+ with $2}"
    grep -E '"(id|status|reason)"|inconclusive' "$tmp/v.json" | grep -v -B1 -A1 '"skip"' | sed 's/^/    /' 
    failures=$((failures + 1))
  fi
}

retry="--retry 4 --retry-max-time 10 --max-time 10"

case_name="curl --retry honours Retry-After, both forms"
reset outage; fleet 4 2 $retry; expect pass

case_name="curl --retry leaves 404 alone"
reset not-found; fleet 2 12 $retry; expect pass

case_name="curl --retry --retry-all-errors retries 404"
reset not-found; fleet 2 12 $retry --retry-all-errors; expect fail non-retryable

case_name="curl --retry without Retry-After: 1 s, 2 s, no jitter"
reset bare-5s; fleet 24 1 $retry; expect fail waves

case_name="retrylab run --subject 'exec:sh client.sh' exits 0"
"$retrylab" run "$scenarios/outage.yaml" --subject "exec:sh $here/client.sh" --clients 2 \
  --no-report --quiet --out "$tmp/out" >"$tmp/run.out" 2>&1
code=$?
if [ $code -eq 0 ]; then echo "ok: $case_name"; else echo "FAIL: $case_name: exit $code"; cat "$tmp/run.out"; failures=$((failures + 1)); fi

[ $failures -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
