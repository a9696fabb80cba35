// Package stubredis owns the Redis backend of the stub server's quotas: a
// stubserver.Limiter whose limits live in Redis, so that several stubs
// (`retrylab serve` replicas) enforce one quota.
package stubredis
