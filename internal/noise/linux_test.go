package noise

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
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

// BenchmarkSleepLoopCost measures what a sleep loop costs a busy Go
// process: the round trips per second of a loopback echo workload (16
// connections, each a goroutine hashing 4 KiB per round trip, bounded to
// a second per measure) with no loop, the timer loop and the kernel loop
// running beside it, alternated in each of b.N rounds; ratio-timer and
// ratio-kernel are each's throughput over no loop's.
//
//	go test -run '^$' -bench BenchmarkSleepLoopCost -benchtime 5x ./internal/noise
func BenchmarkSleepLoopCost(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Skip(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	const conns = 16
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	// measure runs the workload for a second and returns its round trips.
	measure := func() int64 {
		var n atomic.Int64
		deadline := time.Now().Add(time.Second)
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				buf, msg := make([]byte, 64), make([]byte, 4<<10)
				for time.Now().Before(deadline) {
					sum := sha256.Sum256(msg)
					copy(buf, sum[:])
					if _, err := c.Write(buf); err != nil {
						return
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return n.Load()
	}
	kinds := []string{"none", "timer", "kernel"}
	var total [3]int64
	for i := 0; b.Loop(); i++ {
		for j := range kinds {
			k := (i + j) % len(kinds) // each first in turn
			var s *sleeper
			if k > 0 {
				s = startSleeper(DefaultPeriod, k == 2, 0, nil)
			}
			total[k] += measure()
			if s != nil {
				s.halt()
			}
		}
	}
	b.ReportMetric(float64(total[0])/float64(b.N), "none-trips/s")
	b.ReportMetric(float64(total[1])/float64(total[0]), "ratio-timer")
	b.ReportMetric(float64(total[2])/float64(total[0]), "ratio-kernel")
	b.ReportMetric(0, "ns/op")
}
