//go:build race

package client

// raceEnabled reports whether the tests run under the race detector. The
// client is a module of its own and cannot import the harness's
// internal/testenv, which says the same for the harness's tests.
const raceEnabled = true
