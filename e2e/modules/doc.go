// Package modules holds no code: its tests assert the dependency sets the
// repository's module boundaries promise (RELEASING.md, "The four
// modules"). A user of retrylabtest does not link the third-party retry
// libraries; a module that imports only the client requires only
// golang.org/x/time, at a go line older than the harness's; and one that
// adds clientredis gains go-redis and its requirements, at go lines no newer
// than the client's, and nothing of the harness.
package modules
