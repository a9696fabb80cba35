// Package stubredis owns the Redis backend of the stub server's quotas: a
// stubserver.Limiter whose limits live in Redis, so that several stubs
// (`retrylab serve` replicas) enforce one quota together.
//
// # Use
//
// Give stubserver.Options.NewLimiter the function New returns; every stub
// made with the same Options.Prefix and the same quota then counts in the
// same keys:
//
//	ro, o, err := stubredis.ParseURL(quota.Backend) // redis://HOST:PORT/DB[?timeout=50ms]
//	rdb := redis.NewClient(ro)
//	o.Prefix = stubredis.DefaultPrefix + scenarioName + ":"
//	srv, err := stubserver.New(cfg, stubserver.Options{NewLimiter: stubredis.New(rdb, o)})
//
// The Limiters support what the memory limiter (stubserver.NewMemoryLimiter)
// does: layered limits of every algorithm — token-bucket, fixed-window,
// sliding-window, sliding-window-log, leaky-bucket as a meter and as a
// shaper — each keyed globally, per client, per API key or per endpoint,
// with costs, one Limiter per tier. Their decisions are the memory
// limiter's, field for field (Allowed, Delay, RetryIn, Rejected, and each
// limit's Limit, Window, Remaining, Reset, RetryIn): the script does the
// same arithmetic in the same order on IEEE doubles, and the tests compare
// both on thousands of charges at the same instants. The one difference is
// the clock (below). A fixed-window or sliding-window limit's window must
// be whole microseconds; NewLimiter refuses others.
//
// # One script, one round trip
//
// Each Take is one call of one Lua script (quota.lua; EVALSHA, and EVAL
// when Redis has not cached it, as after a restart or SCRIPT FLUSH). The
// issue asked for "one Lua script per algorithm doing the check-and-consume
// for all layers atomically"; since one quota may layer several
// algorithms, the script holds one part per algorithm (load, check,
// charge, report) and runs them in two phases over every limit of the
// request: phase 1 checks each limit, phase 2 charges every limit if all
// had room and none if any had not; then each reports its state. Redis
// runs a script alone, so no other stub's request can come between the
// check of one limit and the charge of another: a rejected request is
// charged to no limit, and an allowed one to all.
//
// # The clock
//
// The script reads the instant with Redis's TIME, in µs, so stubs on hosts
// whose clocks differ still agree; Take's now is not used. Times are held
// as whole µs since the Unix epoch, exact in a double. (The tests set an
// unexported option that passes Take's now instead, to compare decisions
// with the memory limiter's at the same instants; the production path
// always reads TIME.)
//
// # Keys and their lives
//
// Limit i of a Limiter keeps each key's state (Charge.Keys[i]: "" for a
// global limit, else the client id, API key or endpoint) under
//
//	PREFIX TIER "/" LIMIT "/" ALGORITHM "/" KEY
//
// where PREFIX is Options.Prefix (DefaultPrefix "retrylab:quota:"), TIER
// the spec's tier ("" without tiers), LIMIT the limit's name and ALGORITHM
// its algorithm (so that a limit that changes algorithm does not read
// state of another shape). Tier and limit names hold no "/". For example
// retrylab:quota:quota-steady:/default/token-bucket/ for a global token
// bucket. The state:
//
//	token-bucket        hash {tk: tokens, ls: when counted (µs)}  x/time/rate's state
//	fixed-window,       hash {w: window index, c: its count,
//	sliding-window            p: the previous window's count}
//	sliding-window-log  list of arrival instants (µs), one per unit, oldest first
//	leaky-bucket        hash {tu, tf}: when the queue is empty again (µs, and ns beyond)
//
// Every write sets the key's time to live: twice the window for the
// window and log algorithms; twice the time Burst units take to refill
// (token bucket) or drain (leaky bucket), plus twice MaxDelay for a
// shaper; at least a second. A key idle that long is whole again, so its
// expiry loses nothing: a missing key is a whole limit. Redis holds at most
// one key per limit and client-provided key in use (each such key at most
// stubserver.MaxIDBytes); give it a maxmemory with an eviction policy
// (volatile-ttl) if hostile clients may invent keys: an evicted key's limit
// starts whole again, which errs toward allowing.
//
// # When Redis fails
//
// Limiter implements stubserver.HealthChecker with a PING, so the stub's
// /healthz answers 503 while Redis does not answer.
// Every Take is bounded by Options.Timeout (DefaultTimeout, 50 ms; the
// backend URL's timeout=): a Redis that is down, refuses the script, or
// answers later than that makes Take fail, and a reply of the wrong shape
// is an error too. With go-redis's ContextTimeoutEnabled (ParseURL sets
// it) the call runs in the caller's goroutine; without it, it runs in one
// of its own that Take stops waiting for after the Timeout. A client from
// ParseURL neither retries a call nor redials (unless the URL sets
// max_retries): a Redis that refuses connections fails a Take at once,
// and no script runs twice for one request. The Server
// then follows the quota's OnError: closed (the default) answers 503 with
// Retry-After 1 and spends nothing; open lets the request through
// unmetered. Either way it counts the failure (Counts.BackendErrors,
// retrylab_stub_quota_backend_errors_total on serve's /metrics) and logs
// one line at most once a second. A call that timed out after Redis
// received it may still have charged the limits: under a Redis that is
// slow rather than down, a quota can be spent by requests that were
// answered 503.
//
// Requires Redis 4.0 or newer (HSET with several fields; scripts that read
// TIME and then write, which Redis before 5 allows after
// replicate_commands, called when it exists). Redis Cluster is not
// supported: one request's keys may hash to different slots.
package stubredis
