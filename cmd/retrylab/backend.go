package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/stubserver/stubredis"
)

func init() {
	// go-redis logs to stderr on its own (failed dials, pool events);
	// the stub reports a failing backend itself, at most once a second.
	redis.SetLogger(quietRedis{})
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// isRedisURL reports whether a quota Backend names Redis.
func isRedisURL(b string) bool {
	return strings.HasPrefix(b, "redis://") || strings.HasPrefix(b, "rediss://")
}

// quotaBackend is the stub's limiter factory for cfg's quota: nil (in
// memory) unless its Backend is a redis:// URL; then stubredis's, on a
// client of its own, with every key under prefix. close releases the
// client. A URL that does not parse is bad input.
func quotaBackend(cfg stubserver.Config, prefix string) (newLim func(stubserver.LimiterSpec) (stubserver.Limiter, error), close func(), err error) {
	if cfg.Quota == nil || !isRedisURL(cfg.Quota.Backend) {
		return nil, func() {}, nil
	}
	ro, o, err := stubredis.ParseURL(cfg.Quota.Backend)
	if err != nil {
		return nil, nil, badInput(err)
	}
	rdb := redis.NewClient(ro)
	o.Prefix = prefix
	return stubredis.New(rdb, o), func() { rdb.Close() }, nil
}

// withBackend returns cfg with its quota's Backend set to backend (a copy:
// the scenario's own Quota, maybe a built-in's, is left alone).
func withBackend(cfg stubserver.Config, backend string) stubserver.Config {
	q := *cfg.Quota
	q.Backend = backend
	cfg.Quota = &q
	return cfg
}

// redacted is a backend URL as printed: its password hidden.
func redacted(backend string) string {
	u, err := url.Parse(backend)
	if err != nil {
		return "(not a URL)"
	}
	return u.Redacted()
}

// servePrefix is where serve keeps a scenario's quota in Redis: every
// serve of one scenario on one Redis shares it.
func servePrefix(scenario string) string { return stubredis.DefaultPrefix + scenario + ":" }

// runPrefix is where run and compare keep one run's quota: a run starts
// with its quota whole, whatever ran before on the same Redis.
func runPrefix(runID string) string { return stubredis.DefaultPrefix + "run:" + runID + ":" }

// checkBackend refuses, before a run starts, a quota backend URL that
// does not parse: bad input.
func checkBackend(sc *scenarios.Scenario) error {
	if q := sc.Server.Quota; q != nil && isRedisURL(q.Backend) {
		if _, _, err := stubredis.ParseURL(q.Backend); err != nil {
			where := sc.File
			if where == "" {
				where = "scenario " + sc.Name
			}
			return badInput(fmt.Errorf("%s: server.quota.backend: %w", where, err))
		}
	}
	return nil
}

// redisFlagErr checks serve's --redis against the scenario.
func redisFlagErr(backend string, cfg stubserver.Config, name string) error {
	if !isRedisURL(backend) {
		return usagef("--redis %q: want a redis://HOST:PORT/DB or rediss:// URL", redacted(backend))
	}
	if cfg.Quota == nil {
		return usagef("--redis: scenario %q has no quota to keep in Redis", name)
	}
	if _, _, err := stubredis.ParseURL(backend); err != nil {
		return usagef("--redis: %v", err)
	}
	return nil
}

// redisCheckTimeout bounds serve's check, at start, that its quota's Redis
// answers.
const redisCheckTimeout = 3 * time.Second

// checkRedisReachable PINGs the Redis of cfg's quota (a redis:// Backend)
// before serve listens, within redisCheckTimeout: a Redis that does not
// answer is bad input (exit 2), named by where it came from (--redis, or
// the scenario's server.quota.backend) with its password hidden, not a
// stub that answers every request 503 (or lets every one through).
func checkRedisReachable(ctx context.Context, cfg stubserver.Config, name string, flag bool) error {
	if cfg.Quota == nil || !isRedisURL(cfg.Quota.Backend) {
		return nil
	}
	ro, _, err := stubredis.ParseURL(cfg.Quota.Backend)
	if err != nil {
		return badInput(err)
	}
	rdb := redis.NewClient(ro)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rdb.Ping(ctx).Err() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("scenario %q: server.quota.backend", name)
	if flag {
		where = "--redis"
	}
	return usagef("%s %s: Redis does not answer (PING within %v): %v", where, redacted(cfg.Quota.Backend), redisCheckTimeout, err)
}
