// Package sharedbucket holds no code: its test shows, end to end, what
// clientredis promises a fleet — four client processes pacing through one
// Redis-shared bucket keep the built-in quota-steady stub's quota together,
// with no 429, where the same processes pacing each on its own bucket do not.
package sharedbucket
