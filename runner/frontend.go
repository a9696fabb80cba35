package runner

import (
	"context"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/stubserver/stubgrpc"
)

// FrontEnd is the stubserver.Options.NewFrontEnd of a stub speaking
// protocol (server.protocol): stubgrpc's for gRPC, nil for HTTP.
func FrontEnd(protocol string) func(*stubserver.Server) stubserver.FrontEnd {
	if protocol == stubserver.ProtocolGRPC {
		return stubgrpc.New
	}
	return nil
}

// stopGRPC stops f gracefully until ctx ends, then at once.
func stopGRPC(ctx context.Context, f *stubgrpc.FrontEnd) {
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
