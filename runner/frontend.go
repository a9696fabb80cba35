package runner

import (
	"context"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"

	"github.com/retrylab/retrylab/stubserver"
)

// stopGRPC stops f gracefully until ctx ends, then at once.
func stopGRPC(ctx context.Context, f stubserver.FrontEnd) {
	done := make(chan struct{})
	go func() {
		f.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		f.Stop()
		<-done
	}
}

// CheckProtocol refuses a subject that does not speak the protocol of
// sc's stub (server.protocol), as Run does: the CLI checks it with the
// flags, so the mistake is bad input (exit 2). An exec program speaks
// either.
func CheckProtocol(sc *scenarios.Scenario, subj subjects.Subject) error {
	_, program := subj.(subjects.Program)
	return checkProtocol(sc, subj, program, false)
}

// checkProtocol refuses a subject that does not speak the stub's
// protocol (server.protocol): an exec program speaks either; with a
// target the stub is elsewhere and may speak anything.
func checkProtocol(sc *scenarios.Scenario, subj subjects.Subject, program, target bool) error {
	if program || target {
		return nil
	}
	stub := sc.Server.Protocol
	if stub == "" {
		stub = stubserver.ProtocolHTTP
	}
	if speaks := subjects.ProtocolOf(subj); speaks != stub {
		return fmt.Errorf("subject %s speaks %s, and the scenario's stub %s (server.protocol): pick a subject of its protocol (retrylab list)", subj.Name(), speaks, stub)
	}
	return nil
}
