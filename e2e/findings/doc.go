// Package findings owns the test that runs popular Go retry libraries at
// their defaults through retrylab's outage and malformed-header scenarios
// and writes what it finds to docs/libraries.md; it has no API.
package findings
