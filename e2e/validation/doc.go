// Package validation holds the analyzer's validation matrix, a test that
// plays every built-in scenario against the reference client and each
// negative control in virtual time (see validation_test.go). It has no API.
package validation
