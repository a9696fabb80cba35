package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// An HTTP subject on a gRPC built-in is bad input, named with its flag
// and both protocols, before anything runs.
func TestRunProtocolMismatch(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"run", "grpc-outage", "--subject", "retrylab"}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 2 {
		t.Fatalf("exit %d; want 2 (%v)", code, err)
	}
	if !strings.Contains(err.Error(), `--subject "retrylab": subject retrylab speaks http, and the scenario's stub grpc`) {
		t.Errorf("err = %v; want the flag and both protocols named", err)
	}
}

// serve --grpc refuses a scenario whose waits are HTTP's, naming the flag.
func TestServeGRPCRefusesHTTPForms(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"serve", "--grpc", "--scenario", "outage-delta", "--duration", "1s"}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 2 {
		t.Fatalf("exit %d; want 2 (%v)", code, err)
	}
	if !strings.Contains(err.Error(), "--grpc") || !strings.Contains(err.Error(), "form delta is an HTTP Retry-After") {
		t.Errorf("err = %v; want --grpc and the HTTP form named", err)
	}
}
