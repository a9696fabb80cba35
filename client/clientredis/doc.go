// Package clientredis owns the client's token bucket shared through Redis:
// a client.Limiter under which N processes of one application pace within
// one quota, falling back to a local bucket at 1/N of the rate while Redis
// does not answer.
//
// It is a module of its own (github.com/retrylab/retrylab/client/clientredis),
// so an application that paces in-process never requires go-redis.
//
// # Use
//
// Give every process the same Options (Rate for the whole fleet, Burst,
// Prefix) and Processes = the number of processes, make a Limiter on a
// go-redis client, and set it as client.Config.Limiter; the Transport's
// Config.Rate and Burst are then only stated by its Summary:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	lim, err := clientredis.New(rdb, clientredis.Options{
//		Rate: 160, Burst: 10, Processes: 4, Observer: obs,
//	})
//	...
//	tr := client.New(nil, client.Config{Limiter: lim, Quota: 200, Observer: obs})
//
// ContextTimeoutEnabled lets go-redis heed Options.Timeout itself, so the
// Limiter calls Redis in the caller's goroutine; without it, each call is
// handed to a goroutine of its own, abandoned after the Timeout (see
// Options.Timeout).
//
// # The bucket
//
// Each quota key has a hash in Redis at Prefix+key: its tokens and the
// instant they were counted. One Lua script (bucket.lua, run by EVALSHA and
// by EVAL when the server has not cached it) reads the server's clock with
// TIME, so processes on hosts whose clocks differ still agree; refills the
// bucket at Rate up to Burst; and takes one permit, returning the wait
// until it. As with x/time/rate's Reserve, the tokens may go negative, so
// callers queue in turn instead of all retrying at the next refill; the
// queue is bounded by MaxWait (a permit further ahead is not reserved, and
// Reserve fails with ErrWaitTooLong). The key expires twice the time the
// bucket takes to refill from its last state, so idle keys go away. Reserve
// returns a function that gives the permit back when the Transport does not
// use it (best effort; only before the permit's instant).
//
// Over any stretch of time T, the permits whose instants fall in it are at
// most Burst + Rate·T (plus one for rounding), whatever the number of
// processes: the tests check this with goroutines and with four processes.
//
// # When Redis fails
//
// A Redis call that fails or does not answer within Timeout (50 ms by
// default) makes the Limiter fall back: it tells Options.Observer once
// (client.LimiterObserver, with the key, the error and the local rate) and
// paces each key with a local x/time/rate bucket at Rate/Processes, burst
// max(1, Burst/Processes), so N processes together stay near the quota. The
// caller sees no error. At most one call per ProbeInterval (1 s) then tries
// Redis; the first that gets an answer recovers, the Observer is told, and
// the buckets in Redis pace again.
//
// The hand-overs are approximate. A local bucket gives no permit before the
// last one its process took from Redis for the key, so callers still
// waiting for Redis permits are not joined by local ones; but permits given
// locally are unknown to Redis when it comes back, and its bucket, full
// after the pause, may add up to Burst on top of them. A process that loses
// Redis while the others keep it adds up to Rate/N to the fleet's rate.
//
// Requires Redis 4.0 or newer (HSET with several fields; scripts that read
// TIME and write, which Redis 3.2-4 allow after replicate_commands, the
// script calling it when it exists).
package clientredis
