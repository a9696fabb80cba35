package main

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// serveNoise starts measuring the host's noise for a serve recording's end
// record (see serveEnd); nil, measuring nothing, without a recording.
func serveNoise(record string) *noise.Meter {
	if record == "" {
		return nil
	}
	return noise.Start(noise.Options{})
}

// serveEnd writes a serve recording's end record once serving stopped at
// stopped: why (completed at --duration, interrupted by a signal, error
// when the listener failed), when in run time, and the host noise measured
// while serving (nz). It closes rec first, whose encoder enc then is the
// caller's. A serve recording's end record is the stub's account only:
// the analyzer judges no fleet by it (no outcomes, nothing scheduled) and
// merge joins only the fleet files' end records.
func serveEnd(ctx context.Context, srv *stubserver.Server, rec *timeline.Recorder, enc *timeline.Encoder, stopped time.Time, serveErr error, nz *timeline.Noise) error {
	if err := rec.Close(); err != nil {
		return err
	}
	end := timeline.End{Reason: timeline.EndCompleted, Noise: nz}
	if zero, ok := srv.Started(); ok {
		end.At = max(0, int64(stopped.Sub(zero)))
	}
	switch {
	case serveErr != nil && !errors.Is(serveErr, net.ErrClosed):
		end.Reason, end.Errors = timeline.EndError, []string{serveErr.Error()}
	case ctx.Err() != nil:
		end.Reason = timeline.EndInterrupted
		var in *runner.Interrupt
		if errors.As(context.Cause(ctx), &in) {
			end.Signal = in.Signal
		}
	}
	if err := enc.EncodeEnd(&end); err != nil {
		return err
	}
	return enc.Flush()
}
