package noise

import (
	"context"
	"maps"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// loopbackPair is a connected TCP pair on 127.0.0.1: the client's end and
// the server's.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// sinceReceipt is the kernel's reading of c (see connStamp).
func sinceReceipt(c net.Conn) (uint32, bool) { return newConnStamp(c).sinceReceipt(time.Now(), 0) }

// waitReading polls the kernel's reading of c until it is at least ms
// (the kernel's clock moves in ticks: there is nothing to wait on but
// time). Bounded by a deadline.
func waitReading(t *testing.T, c net.Conn, ms uint32) uint32 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, ok := sinceReceipt(c)
		if !ok {
			t.Fatal("the kernel gave no TCP_INFO reading for a loopback socket")
		}
		if got >= ms {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("reading still %d ms, want %d", got, ms)
		}
		runtime.Gosched()
	}
}

func TestStampsBatchOfLateArrivals(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_INFO's last_data_recv is Linux's")
	}
	// Five writes that land in one kernel tick are one batch; a host that
	// splits them across a tick boundary (the race step beside other
	// packages did: batch 3) makes receipts a tick apart, which are two
	// batches rightly. The setup is tried again then, a few times.
	for try := 1; ; try++ {
		if batchOfLateArrivals(t) {
			return
		}
		if try == 5 {
			t.Skip("in 5 tries the host never let five writes land in one kernel tick")
		}
	}
}

// batchOfLateArrivals is one try of TestStampsBatchOfLateArrivals: false
// when the five writes did not land in one tick (nothing asserted then).
func batchOfLateArrivals(t *testing.T) bool {
	s := NewStamps()
	// The tick: the first non-zero reading of a socket whose data waits.
	c0, s0 := loopbackPair(t)
	c0.Write([]byte("x"))
	first := waitReading(t, s0, 1)
	s.Observe(ConnContext(context.Background(), s0), time.Now())
	tick := s.tick.Load() // the reading Observe saw: later, so no smaller
	if tick < first {
		t.Fatalf("tick %d ms, below the first reading %d", tick, first)
	}

	// Five requests left in their sockets for three ticks, then stamped
	// at once: one batch of five.
	clients := make([]net.Conn, 5)
	servers := make([]net.Conn, 5)
	for i := range servers {
		clients[i], servers[i] = loopbackPair(t)
	}
	for _, c := range clients {
		c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	}
	for _, sv := range servers {
		waitReading(t, sv, 3*tick)
	}
	// The kernel's readings of the five: one value when the writes
	// landed in one tick.
	readings := func() map[uint32]bool {
		m := map[uint32]bool{}
		for _, sv := range servers {
			ms, _ := sinceReceipt(sv)
			m[ms] = true
		}
		return m
	}
	before := readings()
	at := time.Now()
	waits := make([]time.Duration, len(servers))
	for i, sv := range servers {
		waits[i] = s.Observe(ConnContext(context.Background(), sv), at.Add(time.Duration(i)*BatchWindow/10))
	}
	if after := readings(); len(before) != 1 || !maps.Equal(before, after) {
		return false // the writes, or the five stamps, straddled a tick
	}
	for i, sv := range servers {
		// Each is surely at least two ticks in its socket: Observe says
		// so, and no more than the kernel's reading.
		ms, _ := sinceReceipt(sv)
		if got := waits[i]; got < time.Duration(2*tick)*time.Millisecond || got > time.Duration(ms)*time.Millisecond {
			t.Errorf("arrival %d: wait %v, want at least two ticks (%d ms) and at most the reading %d ms", i, got, 2*tick, ms)
		}
	}
	src, batch, ok := s.source()
	if !ok {
		t.Fatal("no source")
	}
	if batch != 5 {
		t.Errorf("batch %d, want 5", batch)
	}
	if src.name != timeline.NoiseStamp || src.samples != 6 {
		t.Errorf("source %q with %d samples, want stamp with 6", src.name, src.samples)
	}
	if min := int64(2*tick) * int64(time.Millisecond); src.p50 < min {
		t.Errorf("p50 %v, want at least two ticks (%v): the lower bound of three", time.Duration(src.p50), time.Duration(min))
	}

	// A late arrival past the window starts a new batch: the most stays 5.
	s.Observe(ConnContext(context.Background(), servers[0]), at.Add(10*BatchWindow))
	if _, batch, _ := s.source(); batch != 5 {
		t.Errorf("batch %d after a lone late arrival, want 5", batch)
	}
	return true
}

func TestStampsOnTimeCountNothing(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_INFO's last_data_recv is Linux's")
	}
	s := NewStamps()
	s.tick.Store(4)
	// Arrivals read a tick late at most (a tick fell between receipt and
	// stamp) are on time, however many share an instant: a lockstep fleet.
	at := time.Now()
	for range 20 {
		c, sv := loopbackPair(t)
		c.Write([]byte("x"))
		buf := make([]byte, 1)
		sv.Read(buf)
		if ms, _ := sinceReceipt(sv); ms >= 2*4 {
			t.Skipf("host too busy: a fresh socket read %d ms", ms)
		}
		if w := s.Observe(ConnContext(context.Background(), sv), at); w != 0 {
			t.Errorf("an on-time arrival moved back by %v", w)
		}
	}
	src, batch, ok := s.source()
	if !ok || batch != 0 || src.p99 != 0 {
		t.Errorf("ok %v, batch %d, p99 %v: want a measurement of on-time stamps (0, 0)", ok, batch, time.Duration(src.p99))
	}
}

func TestStampsWithoutSocket(t *testing.T) {
	s := NewStamps()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if w := s.Observe(ConnContext(context.Background(), b), time.Now()); w != 0 {
		t.Errorf("a pipe's arrival moved back by %v", w)
	}
	s.Observe(context.Background(), time.Now()) // no connection kept
	if _, _, ok := s.source(); ok {
		t.Error("a source from connections the kernel says nothing of")
	}
	if s.unknown.Load() != 2 {
		t.Errorf("unknown %d, want 2", s.unknown.Load())
	}
	var nilStamps *Stamps
	nilStamps.Observe(context.Background(), time.Now()) // must not panic
	if _, _, ok := nilStamps.source(); ok {
		t.Error("a nil Stamps measured something")
	}
}

func TestMeterJoinsStamps(t *testing.T) {
	st := NewStamps()
	st.small[12].Store(10)
	st.tick.Store(4)
	st.batch = 7
	// The stamps alone, without the host's lateness: what a sleep loop
	// measures here is the host's.
	m := &Meter{stamps: st, psi0: -1}
	n := m.measure(nil, -1, time.Now(), nil, nil)
	if n.Batch != 7 {
		t.Errorf("Batch %d, want 7", n.Batch)
	}
	// The waits are the stub's, not the arrivals' (stamped at receipt):
	// evidence beside the lateness, not in it.
	if n.SocketP90 != int64(8*time.Millisecond) || n.SocketP99 != int64(8*time.Millisecond) {
		t.Errorf("socket p90 %v, p99 %v; want the stamps' 8ms", time.Duration(n.SocketP90), time.Duration(n.SocketP99))
	}
	if n.P50 != 0 || n.P99 != 0 || n.Source != timeline.NoiseStamp {
		t.Errorf("p50 %v, p99 %v from %q: want the stamp source named, its waits not in the lateness", time.Duration(n.P50), time.Duration(n.P99), n.Source)
	}
	if got := Start(Options{Stamps: st}).Stop(); !strings.Contains(got.Source, timeline.NoiseStamp) || got.SocketP99 != int64(8*time.Millisecond) {
		t.Errorf("a started meter's noise %+v; want the stamp source and its socket waits", *got)
	}
}

// TestMeterStampsLateProbed: for serve's clients on this host, measured
// by a probe, the stamps' socket waits are the stub's again, not their
// lateness.
func TestMeterStampsLateProbed(t *testing.T) {
	st := NewStamps()
	st.small[12].Store(10)
	st.tick.Store(4)
	m := &Meter{stamps: st, stampsLate: true, psi0: -1}
	probe := &source{name: timeline.NoiseProbe, p50: 1000, p90: 2000, p99: 3000, max: 4000, samples: 100}
	n := m.measure(nil, -1, time.Now(), nil, probe)
	if n.Source != "probe+stamp" || n.P50 != 1000 || n.P99 != 3000 || n.SocketP99 != int64(8*time.Millisecond) {
		t.Errorf("noise %+v; want the probe's lateness, the stamps' waits beside it", *n)
	}
	if n := m.measure(nil, -1, time.Now(), nil, nil); n.P50 != int64(8*time.Millisecond) {
		t.Errorf("without the probe's report: p50 %v; want the stamps' 8ms", time.Duration(n.P50))
	}
}

// TestMeterStampsLate: for clients the meter cannot see (serve), the
// stamps' socket waits stand for their lateness.
func TestMeterStampsLate(t *testing.T) {
	st := NewStamps()
	st.small[12].Store(10)
	st.tick.Store(4)
	n := Start(Options{Stamps: st, StampsLate: true}).Stop()
	if n.P50 < int64(8*time.Millisecond) || n.SocketP99 != int64(8*time.Millisecond) {
		t.Errorf("p50 %v, socket p99 %v; want the stamps' 8ms in both", time.Duration(n.P50), time.Duration(n.SocketP99))
	}
}

// BenchmarkObserve measures what stamping an arrival costs the stub: the
// kernel's reading of the connection and the count, from parallel
// goroutines each on a loopback connection of its own.
//
//	go test -run '^$' -bench BenchmarkObserve -benchmem ./internal/noise
func BenchmarkObserve(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Skip(err)
	}
	defer ln.Close()
	s := NewStamps()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		sv, err := ln.Accept()
		if err != nil {
			b.Error(err)
			return
		}
		defer sv.Close()
		ctx := ConnContext(context.Background(), sv)
		for pb.Next() {
			s.Observe(ctx, time.Now())
		}
	})
}

// TestStampsSource: readings counted apart (on time without the mutex,
// the rest with it) make one distribution of waits past the tick, the
// smallest non-zero reading.
func TestStampsSource(t *testing.T) {
	s := NewStamps()
	for _, ms := range []uint32{0, 9, 4, 7} {
		s.lowerTick(ms)
	}
	if got := s.Tick(); got != 4*time.Millisecond {
		t.Fatalf("Tick() = %v after readings 0, 9, 4, 7; want 4ms", got)
	}
	s.small[4].Store(80)
	s.small[8].Store(9)
	s.large[smallMax+40] = 11
	src, _, ok := s.source()
	ms := int64(time.Millisecond)
	want := source{name: timeline.NoiseStamp, p50: 0, p90: (smallMax + 36) * ms, p99: (smallMax + 36) * ms, max: (smallMax + 36) * ms, samples: 100}
	if !ok || src != want {
		t.Errorf("source() = %+v, %v; want %+v", src, ok, want)
	}
}

// TestStampsAnsweredSkipsTheKernel: an arrival less than a tick after the
// connection's last answer is on time without asking the kernel (the
// client sent it after the answer); one later, or on a connection never
// answered, is read from the kernel. The request here waits three ticks
// in its socket, so only a reading from the kernel moves it.
func TestStampsAnsweredSkipsTheKernel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_INFO's last_data_recv is Linux's")
	}
	s := NewStamps()
	s.tick.Store(4)
	c, sv := loopbackPair(t)
	ctx := ConnContext(context.Background(), sv)
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	waitReading(t, sv, 3*4)
	now := time.Now()
	s.Answered(ctx, now.Add(-time.Millisecond))
	if w := s.Observe(ctx, now); w != 0 {
		t.Errorf("an arrival 1ms after the last answer moved back by %v; want 0, unasked", w)
	}
	s.Answered(ctx, now.Add(-10*time.Millisecond))
	if w := s.Observe(ctx, now); w < 8*time.Millisecond {
		t.Errorf("an arrival 10ms after the last answer moved back by %v; want the kernel's reading, at least 8ms", w)
	}
	fresh := ConnContext(context.Background(), sv) // never answered
	if w := s.Observe(fresh, now); w < 8*time.Millisecond {
		t.Errorf("a first arrival moved back by %v; want the kernel's reading, at least 8ms", w)
	}
	if src, _, _ := s.source(); src.samples != 3 {
		t.Errorf("%d samples; want the 3 arrivals, asked or not", src.samples)
	}
}
