#!/bin/sh
# curl's own retries as a retrylab exec subject (docs/exec.md): requests
# $RETRYLAB_BASE_URL/r/0 .. /r/N-1 and prints one result line each; with
# --processes (RETRYLAB_CLIENTS set) it plays several clients at once, one
# background loop each.
#   retrylab run examples/scenarios/outage.yaml --subject 'exec:sh examples/shell/client.sh'
#   retrylab run examples/scenarios/bare-5s.yaml --subject 'exec:sh examples/shell/client.sh' --clients 24 --processes 4
# Extra arguments go to curl (e.g. --retry-all-errors, the mistake).
#
# --retry 4 retries a timeout and HTTP 408, 429, 500, 502, 503, 504 (never
# another 4xx), waits as Retry-After says (both forms, since curl 7.66),
# else 1 s doubling (no jitter); --retry-max-time caps the time retrying.
# The body goes to stdout, not -o /dev/null: curl truncates its output
# file before a retry, and /dev/null cannot be truncated (curl: (23)).
n=${RETRYLAB_REQUESTS:-1}
if [ -n "${RETRYLAB_CLIENTS+set}" ]; then
  list=$(echo "$RETRYLAB_CLIENTS" | tr , ' ') # ids and ranges A-B
else
  list=${RETRYLAB_CLIENT:-0}
fi
echo ready
j=0
for item in $list; do
  k=${item%-*}
  while [ "$k" -le "${item#*-}" ]; do
    j=$((j + 1))
    if [ -n "${RETRYLAB_CLIENTS+set}" ]; then
      base=$RETRYLAB_BASE_URL_PREFIX$k
      key=$(echo "${RETRYLAB_API_KEYS:-}" | cut -d, -f"$j")
    else
      base=$RETRYLAB_BASE_URL
      key=${RETRYLAB_API_KEY:-}
    fi
    # Client k's requests; a line is one short write, so the lines of
    # clients playing at once never mix.
    (
      i=0
      while [ "$i" -lt "$n" ]; do
        if curl -sS --fail --retry 4 --retry-max-time 10 --max-time 10 ${key:+-H} ${key:+"Authorization: Bearer $key"} \
          "$@" "$base/r/$i" >/dev/null 2>&1; then
          echo "ok /c/$k/r/$i"
        else
          echo "fail /c/$k/r/$i gave-up"
        fi
        i=$((i + 1))
      done
    ) &
    k=$((k + 1))
  done
done
wait
