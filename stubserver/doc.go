// Package stubserver owns the throttling stub server: phases, behaviours,
// Retry-After forms, rate-limit headers, quotas and their limiters, faults,
// finite capacity (workers and a queue), and the recording of one timeline attempt per request.
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
// # Upstream
//
// With Config.Upstream the stub stands in front of a real API: in ok
// phases, for requests a quota admits, and for passthrough answers (a
// phase's, or a mix's share) it forwards the request with an
// httputil.ReverseProxy — the upstream's base URL joined with the path
// and query, the upstream's Host, X-Forwarded-For, -Host and -Proto set,
// hop-by-hop headers dropped, the body streamed through (and not bounded
// by MaxBodyBytes; only a write's first BodyDigestBytes are read first, for
// its identity, and sent on as they were), event streams and responses of unknown length
// flushed as they come — and relays the upstream's status, headers and
// body. The attempt is recorded when the upstream's header is relayed,
// with its status and Upstream "relayed", and with what the upstream said
// of when to come back, read by the rules of the stub's own values: its
// raw Retry-After, a not_before from it (delay-seconds from the response;
// an HTTP-date, in any of its three forms, as run time, a past one as the
// response instant; nothing for a negative, fractional or garbage value
// or a delay too long to represent), and its rate-limit headers
// (RateLimit-Policy, RateLimit, RateLimit-*, X-RateLimit-*,
// X-Rate-Limit-*; "Name: value" joined by "; ", each value cut to
// MaxIDBytes) unless the stub's quota recorded its own. Phases that throttle or fail
// answer from the stub, before the upstream is called, and so do a
// quota's rejections. An upstream that gives no response (refused, reset,
// no header within UpstreamHeaderTimeout) gets the client a 502 from the
// stub, recorded with Upstream "failed" (the analyzer does not judge the
// client's retries after it); a client that leaves first is recorded
// abandoned. A body the upstream breaks off after its header is cut short
// for the client; its record keeps the status.
//
// # Capacity
//
// Config.Capacity makes the server unable to keep up with any load:
// Concurrency workers, a queue of at most Queue places, and a service time
// per request (mean Service; fixed, exponential capped at 50 times the
// mean, or uniform in [0, 2*Service]; drawn from a source seeded by
// Options.Seed, apart from the mix and spread draws, in the order workers
// are granted, so a run in virtual time replays). Quotas answer "you asked
// too much"; capacity answers "I cannot keep up". The rules, exactly:
//
//   - Work: only a request the server would answer 200 in an ok or quota
//     phase goes through the model, after the latency and after the quota
//     allowed it. Status, mix and fault phases, the quota's rejections and
//     401s answer without a worker, as an outage or a gateway does.
//   - Workers: a phase's Capacity (a share in (0, 1], 0 for all) runs
//     round(share*Concurrency) workers, at least 1, from the instant the
//     phase begins to the instant it ends. When they shrink, services in
//     progress finish and no new one starts until fewer are busy; when they
//     grow back, queued requests are taken at that instant. The queue's
//     size does not scale.
//   - Admission: a request that finds a free worker and nobody queued takes
//     it; else it joins the queue; with the queue full (or Queue 0) it is
//     rejected at once: 503 with the phase's Retry-After, recorded with
//     Limit timeline.LimitCapacity ("capacity"), Queue 0 and Service 0.
//   - Discipline: when a worker frees, it takes the oldest queued request
//     (fifo, the default) or the newest (lifo, as servers that shed stale
//     work do; the oldest may then wait until its client gives up).
//   - Service: a granted request holds its worker for its service time,
//     then is answered (200, or the quota's answer). Its client leaving
//     does not shorten the service: the work is wasted.
//   - A client that goes away: while queued, with CancelOnDisconnect the
//     request leaves the queue at that instant, unserved (recorded
//     abandoned with the status it would have had, 200, and Service 0;
//     a request whose client left during the latency is never started);
//     without it, the request keeps its place and is served when its turn
//     comes. After a service, a client that has gone gets nothing and the
//     attempt is recorded abandoned with its Service: wasted work
//     (Counts.Capacity.Wasted).
//   - Stopping: once Seal, Close or Shutdown begins, the pool starts no
//     service: queued requests leave at once with 503, Limit "capacity",
//     the time they queued and Service 0, and services in progress are cut
//     short, answered as served with the service they got. A request
//     granted at the instant the server stops got no service: 503 too.
//   - Instants, not goroutines: a worker is free from the instant its
//     service ends, so a request arriving then finds it free, whichever
//     goroutine runs first. In a virtual run (Options.Virtual), where many
//     events share an instant, requests arriving at one instant are
//     admitted a nanosecond later in the order of their client, key and
//     attempt, and a handler decides whether its client is still there
//     only once everything due at that instant has happened (a timeout
//     firing as the service ends wins: abandoned). So a seeded virtual run
//     replays exactly, lockstep clients included.
//
// Each attempt records Queue (time waiting for a worker) and Service (time
// holding one), in ns; Done - At spans the latency, Queue and Service.
// The latency (Config.Latency, a phase's) is not work: it holds no worker.
// Capacity cannot go with Config.Upstream: there the upstream does the
// work (Validate rejects the pair).
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
// # Quotas
//
// A Quota layers limits that all apply (10/s burst 20, 300/1m, 10000/1d):
// a request is allowed only if every limit has room for its cost, and is
// then charged to all of them at once; a rejected request is charged to
// none. Each limit has its algorithm, key (global, per client, per API key
// — Authorization: Bearer or X-Api-Key — or per endpoint: method and the
// path below /c/{c}/r/{n}) and the status it answers when it rejects (429,
// or 403 for a secondary limit as GitHub sends it). The five algorithms,
// in memory (NewMemoryLimiter) and per key:
//
//	token-bucket        refills Limit per Per up to Burst (x/time/rate)   O(1)
//	fixed-window        Limit per window aligned to the Unix epoch         O(1)
//	sliding-window      counter: the previous window weighted by overlap   O(1)
//	sliding-window-log  exact: one timestamp per request in the window     O(Limit)
//	leaky-bucket        a queue of Burst draining Limit per Per: as a      O(1)
//	                    meter it rejects what overflows; as a shaper
//	                    (mode shape) it holds a request until its turn,
//	                    up to MaxDelay, then rejects
//
// Retry-After: limiter is the longest wait of the limits that rejected.
// Tiers give API keys their own limits (exact keys or prefixes ending in
// "*", the longest match winning; a Default tier for other keys, an
// Anonymous tier for requests without one; 401 where no tier applies).
// Costs charge matching requests more than one unit of every limit. A
// Limiter built by Options.NewLimiter may keep the state elsewhere:
// package stubredis keeps it in one Redis shared by several stubs, with
// the memory limiter's decisions (one script per request checks every
// limit and charges all or none, on Redis's clock). When it fails or is
// slower than its timeout, the quota's OnError answers 503 (closed, the
// default; Retry-After: limiter is then 1 s) or lets the request through
// unmetered (open), and either way counts it (Counts.BackendErrors),
// logs at most one line a second, the backend's password hidden, and marks
// the attempt as the stub's own failure: Attempt.Backend
// timeline.BackendClosed on the 503, timeline.BackendOpen on the request
// let through. GET /healthz asks every Limiter that can be asked
// (HealthChecker; stubredis: a PING) within HealthTimeout on each call:
// 200 "ok" while they answer, else 503 with one line naming the backend
// (password hidden) and the error.
//
// # Rate-limit headers
//
// In quota phases the server publishes the quota's state after each
// decision: with Config.Headers ietf, the RateLimit-Policy and RateLimit
// structured fields of draft-ietf-httpapi-ratelimit-headers —
// RateLimit-Policy lists every limit of the request's tier
// (`"second";q=10;w=1, "minute";q=300;w=60`) and RateLimit reports the
// binding one (`"minute";r=0;t=12`, t the seconds until it is whole again,
// or until the request would fit, rounded up); with x-ratelimit,
// X-RateLimit-Limit, -Remaining and -Reset (epoch seconds, rounded up) of
// the binding limit. The binding limit is the one that rejected with the
// longest wait, else the one with the fewest units left.
//
// A 429 is a rate limit by definition: every 429 the stub answers without a
// quota's decision (a status phase's, a mix's) carries the family's headers
// saying nothing remains, and so does a status phase marked RateLimit (a
// 403 rate limit without a quota), which also sends Retry-After as 429
// does. They reset at the not_before the answer records (the instant its
// Retry-After names), else — no Retry-After, or an unusable one — at the
// phase's end, else (the last phase) one second after the response:
// RateLimit `"default";r=0;t=N`, or X-RateLimit-Remaining 0 and -Reset.
// When the server has a quota (used by other phases), the request's tier
// publishes its policy as well: RateLimit-Policy, with RateLimit naming its
// first limit, or that limit's X-RateLimit-Limit. They are recorded in
// Attempt.RateLimit as a quota's are. Other answers send none.
//
// # Recording and identity
//
// Every request except GET /metrics and /healthz becomes one
// timeline.Attempt handed to Options.Recorder before the response leaves
// (the Recorder encodes on its own goroutine). Each carries the digest of
// the request's Idempotency-Key (timeline.KeyDigest, in Attempt.IdemKey,
// with Idempotent set), never the key, and the client's X-Retrylab-Wait
// claim as sent (timeline.WaitHeader, in Attempt.WaitClaim). Identify derives the client and
// the logical request from what a client cannot change by mistake between
// the attempts of one logical request; attempts are numbered by arrival
// per key:
//
//   - /c/{client}/r/{seq}[/...]: the fleet's own identity, key
//     "{client}/{seq}".
//   - Else the client is X-Client-Id, else the remote IP, and an
//     X-Retrylab-Request header (RequestHeader), set deliberately once per
//     logical request, gives key "CLIENT req:VALUE".
//   - Else the key is "CLIENT METHOD path": the path without its query (a
//     per-attempt cache-buster or signature timestamp must not split a
//     retry), and for a write — every method but GET, HEAD, OPTIONS and
//     TRACE — with a body, " body:" and 16 hex digits of the SHA-256 of its
//     first BodyDigestBytes (64 KiB), plus its declared length when it is
//     longer (a chunked body that long is digested by its first 64 KiB
//     alone). The server reads that much of the body and puts it back for
//     the upstream or its own draining.
//
// The Idempotency-Key is evidence, not identity: an application that makes
// a fresh key for every attempt still has its retries paired (the
// idempotency check's finding: the key changed), where keying by it made
// each retry a new logical request. The rule's ambiguous case: two
// different logical requests of one client with the same method, path and
// body — two identical orders — are one key. When the first succeeded
// before the second arrives, the analyzer of a serve recording starts a
// new logical request at the second (a key reused after a success); when
// the first failed, or both are in flight at once, the second's attempts
// are numbered as retries of the first and judged so (retry-after,
// instant-retry, attempts), and their attempt numbers interleave. A client
// that sends such requests should vary the path (/c/{client}/r/{seq} when
// it talks to the stub directly), or send X-Retrylab-Request, or give each
// concurrent worker its own X-Client-Id. Two queries of one path from one
// client (GET /search?q=a, then ?q=b) are one key too: a later one after a
// success starts over, as above.
//
// The numbering keeps at most two generations of 65536 keys: a key unseen
// for that many new keys starts again at 1.
//
// # Memory under hostile input
//
// Client-provided identities — the client id (path or X-Client-Id), the
// API key, the Idempotency-Key (recorded only as its digest, but bounded
// all the same), X-Retrylab-Request, and the logical-request key and endpoint
// derived from them — are at most MaxIDBytes (256) each: a request with a
// longer one is answered 400 (the body names which) before anything else,
// and recorded with its client, key and path cut to 256 bytes ending in
// "...[truncated]". Every table keyed by such strings is bounded in count
// and in bytes: the attempt counter holds two generations of at most 65,536
// keys and 4 MiB of key each, the memory limiter at most 65,536 keys and
// 4 MiB of key per limit (plus, for a sliding-window-log, at most 64 MiB
// of timestamps), so their memory has a ceiling whatever the traffic
// (BENCHMARKS.md, "Stub server: memory under hostile identities", has it
// measured). Request headers are bounded by MaxHeaderBytes and bodies by
// MaxBodyBytes.
//
// # Metrics
//
// The Server counts answers by phase and code, the quota's events, and the
// capacity model's state and totals (workers, busy, queued, rejected,
// dropped, service and wasted time) with atomics (Server.Counts). GET /metrics is served by the handler that
// Options.Metrics builds — package stubprom's Prometheus exporter in
// `retrylab serve` — and answers 404 without one, so the stub depends on
// no metrics library. /metrics and /healthz are never recorded or counted.
package stubserver
