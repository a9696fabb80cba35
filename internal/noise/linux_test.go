package noise

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process (self) or its waited-for children
// used, user and system.
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMeterCPU measures what a Meter costs: the CPU it uses as a
// share of one core (cpu-%) over b.N wake-ups of its sleep loop, and with
// the probe the probe process's share (probe-cpu-%). A meter of a quiet
// process is all of the process's CPU, so run it alone.
func BenchmarkMeterCPU(b *testing.B) {
	for _, period := range []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, DefaultPeriod} {
		for _, probe := range []bool{false, true} {
			b.Run(fmt.Sprintf("period=%v/probe=%v", period, probe), func(b *testing.B) {
				reached, ready := make(chan struct{}), make(chan struct{})
				c0, k0, w0 := cpuTime(syscall.RUSAGE_SELF), cpuTime(syscall.RUSAGE_CHILDREN), time.Now()
				h := hooks{sleepWant: uint64(b.N), sleepReached: reached}
				if probe {
					h.probeReady = ready
				}
				o := Options{Period: period}
				if probe {
					o.Probe = probeCommand(b)
				}
				m := start(o, h)
				<-reached
				if probe {
					<-ready
				}
				n := m.Stop()
				wall := time.Since(w0)
				b.ReportMetric(float64(cpuTime(syscall.RUSAGE_SELF)-c0)/float64(wall)*100, "cpu-%")
				if probe {
					b.ReportMetric(float64(cpuTime(syscall.RUSAGE_CHILDREN)-k0)/float64(wall)*100, "probe-cpu-%")
				}
				b.ReportMetric(float64(n.P99)/1e3, "p99-µs")
			})
		}
	}
}

// BenchmarkLatenessUnderHogs measures the sleep loops' lateness (p50,
// p99, max in µs), on a timer (the sleep source) and in the kernel (the
// probe's), while 0, 2 or 4 processes spin on the CPU (each ended with the
// sub-benchmark, and by a 60 s timeout at the latest).
func BenchmarkLatenessUnderHogs(b *testing.B) {
	for _, hogs := range []int{0, 2, 4} {
		for _, kernel := range []bool{onTimer, inKernel} {
			b.Run(fmt.Sprintf("hogs=%d/kernel=%v", hogs, kernel), func(b *testing.B) { latenessUnderHogs(b, hogs, kernel) })
		}
	}
}

// latenessUnderHogs is one of BenchmarkLatenessUnderHogs's cells.
func latenessUnderHogs(b *testing.B, hogs int, kernel bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cmds []*exec.Cmd
	for range hogs {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			b.Skip(err)
		}
		cmds = append(cmds, c)
	}
	defer func() {
		cancel()
		for _, c := range cmds {
			c.Wait()
		}
	}()
	reached := make(chan struct{})
	sl := startSleeper(DefaultPeriod, kernel, uint64(b.N), reached)
	<-reached
	sl.halt()
	s, _ := histSource("sleep", sl.hist)
	b.ReportMetric(float64(s.p50)/1e3, "p50-µs")
	b.ReportMetric(float64(s.p99)/1e3, "p99-µs")
	b.ReportMetric(float64(s.max)/1e3, "max-µs")
}

// TestProbeSIGTERM: a probe (this test binary, see TestMain) that gets
// SIGTERM reports what it measured and exits; SIGINT, which a terminal
// sends the whole process group, does not stop it.
func TestProbeSIGTERM(t *testing.T) {
	ready := make(chan struct{})
	p, err := newProbe(probeCommand(t), time.Millisecond, ready)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ready, "the probe's ready line")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.waited:
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		p.waited <- nil // for stop
	case <-time.After(time.Minute):
		t.Fatal("the probe did not exit on SIGTERM")
	}
	if s := p.stop(time.Minute); s == nil || s.samples < 1 {
		t.Fatalf("stop = %v after SIGTERM; want a report (output %q)", s, p.out.bytes())
	}
}
