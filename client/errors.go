package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

var (
	// ErrBudgetExhausted is the reason a call gave up because its next wait
	// (or its attempt in flight) would cross Config.Budget, the call's time
	// budget. (ErrRetryBudgetExhausted is the other budget's: the retries
	// of all the Transport's calls together.)
	ErrBudgetExhausted = errors.New("client: time budget exhausted")
	// ErrAttemptsExhausted is the reason a call gave up after
	// Config.MaxAttempts attempts that all failed retryably.
	ErrAttemptsExhausted = errors.New("client: attempts exhausted")
	// ErrAttemptTimeout is the error of an attempt that Config.AttemptTimeout
	// ended; such attempts are retried while the budget lasts.
	ErrAttemptTimeout = errors.New("client: attempt timed out")
)

// RetryError is the error RoundTrip returns when a call ends without a
// response to give back: the retries ran out (Reason is ErrBudgetExhausted,
// ErrAttemptsExhausted or ErrRetryBudgetExhausted), the caller's context ended (Reason is its
// error), or an attempt failed with an error not worth retrying (Reason is
// nil). errors.Is and errors.As see both Reason and Err.
type RetryError struct {
	Method, URL string
	// Attempts is the number of attempts sent (0 when the call gave up while
	// pacing the first one).
	Attempts int
	// Status is the last attempt's status; 0 when it failed with Err.
	Status int
	// Elapsed is the time the call spent, waits included.
	Elapsed time.Duration
	// Wait is the wait that was refused because it would cross the budget;
	// 0 otherwise.
	Wait time.Duration
	// Reason says why the call stopped; see the type's doc.
	Reason error
	// Err is the last attempt's transport error, nil if it got a response.
	Err error
}

func (e *RetryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client: %s %s: giving up after %d attempt", e.Method, e.URL, e.Attempts)
	if e.Attempts != 1 {
		b.WriteByte('s')
	}
	fmt.Fprintf(&b, " in %v", e.Elapsed.Round(time.Millisecond))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (last status %d)", e.Status)
	}
	if e.Reason != nil {
		msg := strings.TrimPrefix(e.Reason.Error(), "client: ")
		if e.Wait > 0 {
			fmt.Fprintf(&b, ": %s (next wait %v)", msg, e.Wait.Round(time.Millisecond))
		} else {
			fmt.Fprintf(&b, ": %s", msg)
		}
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns Reason and Err, those that are set.
func (e *RetryError) Unwrap() []error {
	switch {
	case e.Reason != nil && e.Err != nil:
		return []error{e.Reason, e.Err}
	case e.Reason != nil:
		return []error{e.Reason}
	case e.Err != nil:
		return []error{e.Err}
	}
	return nil
}

// IsTransient is the default Config.RetryError: it reports whether err looks
// like a network failure that may pass: connection refused, reset or aborted,
// a broken pipe, an unexpected EOF, a timeout, or any other net.Error
// (dial, read and write failures) — except certificate and TLS verification
// failures, a host that DNS says does not exist, and context cancellation.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The Transport itself retries attempts its own timer ended.
		return false
	}
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		dnsErr      *net.DNSError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalidErr), errors.As(err, &recordErr):
		return false
	case errors.As(err, &dnsErr):
		return !dnsErr.IsNotFound
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
