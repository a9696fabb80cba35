// Package thirdparty puts real third-party Go retry libraries under test as
// subjects, each at its defaults: hashicorp/go-retryablehttp, cenkalti/backoff,
// failsafe-go, go-resty, avast/retry-go and sethvargo/go-retry. Importing it
// registers them (an init function calls subjects.Register), so only code
// that imports it — the retrylab command, and the tests that compare
// libraries — links those libraries: a user of retrylabtest or subjects
// does not inherit them.
//
// With fleet.processes each adapter's New is called once per process and
// its Caller shared by the process's clients, as each library says to use
// it: one retryablehttp.Client, one resty.Client ("goroutine concurrent
// safe"), one failsafehttp round tripper, and for backoff, retry-go and
// go-retry (retry functions called per request) one http.Client. None
// keeps state across calls that decides when to retry, and none takes a
// source per client: retryablehttp, failsafe and go-retry draw nothing
// and replay shared as they do alone; backoff, resty and retry-go draw
// from a source global to the program and replay in neither mode.
package thirdparty
