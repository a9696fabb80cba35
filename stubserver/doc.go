// Package stubserver owns the throttling stub server: phases, behaviours,
// Retry-After forms, rate-limit headers, quotas and their limiters, faults,
// and the recording of one timeline attempt per request.
//
// # Schedule and behaviours
//
// A Config lists phases; each lasts For from the end of the one before (the
// last lasts until the run ends) and answers every request that arrives in
// it: ok (200), quota (200 while the Limiter allows, else 429), a fixed
// status, a weighted mix of statuses and faults (drawn from Options.Seed),
// or a fault. The reset fault closes the connection without a response
// (with SO_LINGER 0 on TCP, so the client sees a reset); hang holds the
// request until the client gives up or Shutdown begins, and then closes
// the connection unanswered (a client that gives up during a hang is still
// recorded as hang). Latency (Config.Latency, or the phase's own) delays
// every answer; a latency past the client's timeout is the "delay" fault.
// A client that goes away before its response is written (it gave up
// during the latency) gets nothing: the attempt is recorded as the fault
// abandoned (timeline.FaultAbandoned) with the status it would have had
// and no Retry-After or not_before, never as a success.
//
// # Retry-After
//
// A phase whose form is not none sends Retry-After on every 429 and 5xx it
// answers. The delay comes from a fixed value, the limiter (time until the
// quota admits a request again), or the phase's end, plus a random spread
// when set: for delta and date, whole seconds drawn uniformly from
// 0..Spread/1s after rounding (so the values on the wire differ); for the
// other forms, uniform in [0, Spread) before writing. What is sent, and the
// not_before recorded with it (ns since the run's start):
//
//	delta       the delay in seconds, rounded up      response + the seconds sent
//	date        IMF-fixdate of response + delay,       the date sent, as run time
//	            rounded up to the second
//	past-date   IMF-fixdate one hour before the        the response instant (an
//	            response, seconds truncated            immediate retry is allowed)
//	huge        31536000 (HugeSeconds, one year)       response + one year
//	negative    "-N" (N the delay, at least 1)         none
//	garbage     "soon, maybe"                          none
//	fractional  "N.5" or the delay with one decimal    none
//
// # Rate-limit headers and quotas
//
// In quota phases the server publishes the quota's state after each
// decision: with Config.Headers ietf, the RateLimit-Policy and RateLimit
// structured fields of draft-ietf-httpapi-ratelimit-headers (one policy
// named "default": `"default";q=100;w=1` and `"default";r=42;t=1`, t the
// seconds until the quota is whole again, rounded up); with x-ratelimit,
// X-RateLimit-Limit, -Remaining and -Reset (epoch seconds, rounded up).
// Other phases send none. A Limiter decides; the default is in memory
// (token bucket over golang.org/x/time/rate, fixed window, sliding window
// counter), keyed globally, per client, per API key (Authorization: Bearer
// or X-Api-Key) or per endpoint (method and the path below /c/{c}/r/{n}).
//
// # Recording and identity
//
// Every request except GET /metrics and /healthz becomes one
// timeline.Attempt handed to Options.Recorder before the response leaves
// (the Recorder encodes on its own goroutine). Identify derives the client
// and the logical request; attempts are numbered by arrival per key. The
// numbering keeps at most two generations of 65536 keys: a key unseen for
// that many new keys starts again at 1.
//
// # Memory under hostile input
//
// Client-provided identities — the client id (path or X-Client-Id), the
// API key, the Idempotency-Key, and the logical-request key and endpoint
// derived from them — are at most MaxIDBytes (256) each: a request with a
// longer one is answered 400 (the body names which) before anything else,
// and recorded with its client, key and path cut to 256 bytes ending in
// "...[truncated]". Every table keyed by such strings is bounded in count
// and in bytes: the attempt counter holds two generations of at most 65,536
// keys and 4 MiB of key each, the memory limiter at most 65,536 keys and
// 4 MiB of key. With per-entry overhead the worst case is keys of 64
// bytes, where both bounds meet: measured, 14.7 MiB for the counter and
// 14.3 MiB for a token-bucket limiter, about 30 MiB in all whatever the
// traffic (with 256-byte keys, 9.7 and 6.6 MiB). Request headers are
// bounded by MaxHeaderBytes and bodies by MaxBodyBytes.
//
// # Metrics
//
// The Server counts answers by phase and code and the quota's events with
// atomics (Server.Counts). GET /metrics is served by the handler that
// Options.Metrics builds — package stubprom's Prometheus exporter in
// `retrylab serve` — and answers 404 without one, so the stub depends on
// no metrics library. /metrics and /healthz are never recorded or counted.
package stubserver
