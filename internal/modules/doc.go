// Package modules holds no code: its tests assert the dependency sets the
// repository's module boundaries promise (README, "Installation and
// modules"). A user of retrylabtest does not link the third-party retry
// libraries, and a module that imports only the client requires only
// golang.org/x/time, at a go line older than the harness's.
package modules
