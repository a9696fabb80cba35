// Package thirdparty puts real third-party Go retry libraries under test as
// subjects, each at its defaults: hashicorp/go-retryablehttp, cenkalti/backoff,
// failsafe-go, go-resty, avast/retry-go and sethvargo/go-retry. Importing it
// registers them (an init function calls subjects.Register), so only code
// that imports it — the retrylab command, and the tests that compare
// libraries — links those libraries: a user of retrylabtest or subjects
// does not inherit them.
package thirdparty
