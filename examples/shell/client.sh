#!/bin/sh
# curl's own retries as a retrylab exec subject (docs/exec.md): requests
# $RETRYLAB_BASE_URL/r/0 .. /r/N-1 and prints one result line each.
#   retrylab run examples/scenarios/outage.yaml --subject 'exec:sh examples/shell/client.sh'
# Extra arguments go to curl (e.g. --retry-all-errors, the mistake).
#
# --retry 4 retries a timeout and HTTP 408, 429, 500, 502, 503, 504 (never
# another 4xx), waits as Retry-After says (both forms, since curl 7.66),
# else 1 s doubling (no jitter); --retry-max-time caps the time retrying.
# The body goes to stdout, not -o /dev/null: curl truncates its output
# file before a retry, and /dev/null cannot be truncated (curl: (23)).
n=${RETRYLAB_REQUESTS:-1}
echo ready
i=0
while [ "$i" -lt "$n" ]; do
  if curl -sS --fail --retry 4 --retry-max-time 10 --max-time 10 "$@" "$RETRYLAB_BASE_URL/r/$i" >/dev/null 2>&1; then
    echo "ok r/$i"
  else
    echo "fail r/$i gave-up"
  fi
  i=$((i + 1))
done
