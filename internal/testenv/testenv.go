// Package testenv tells the repository's tests about the way they were
// built. Its one fact so far is RaceEnabled: whether the race detector is
// on (go test -race), under which loopback load runs several times slower,
// so tests that play many scenarios play fewer seeds or skip their costliest
// cells.
package testenv
