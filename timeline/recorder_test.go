package timeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestRecorderConcurrentNoLoss(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	if err := enc.EncodeMeta(&Meta{Format: Format, Recorder: "serve"}); err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(enc, 4) // a small buffer forces backpressure
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			a := Attempt{Client: fmt.Sprint(g), Method: "GET"}
			for i := range each {
				a.Key = fmt.Sprintf("%d/%d", g, i)
				a.Attempt = i + 1
				rec.Attempt(&a) // a is reused: the Recorder must copy
				if i%100 == 0 {
					rec.Outcome(&Outcome{Client: a.Client, Key: a.Key, Result: ResultOK})
				}
			}
		})
	}
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatalf("Close() = %v; want nil", err)
	}
	dec := NewDecoder(&buf)
	var r Record
	counts := map[string]int{}
	seen := map[string]bool{}
	for {
		err := dec.Decode(&r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		counts[r.Type]++
		if r.Type == TypeAttempt {
			if seen[r.Attempt.Key] {
				t.Errorf("key %q recorded twice", r.Attempt.Key)
			}
			seen[r.Attempt.Key] = true
		}
	}
	want := map[string]int{TypeMeta: 1, TypeAttempt: goroutines * each, TypeOutcome: goroutines * each / 100}
	for k, w := range want {
		if counts[k] != w {
			t.Errorf("records of type %s = %d; want %d", k, counts[k], w)
		}
	}
}

// syncBuffer is a bytes.Buffer safe to read while the Recorder writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func TestRecorderFlushesWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		rec := NewRecorder(NewEncoder(&buf), 16)
		rec.Attempt(&Attempt{Client: "1", Key: "1/0"})
		synctest.Wait()
		if n := buf.Len(); n != 0 {
			t.Errorf("bytes written before the flush delay = %d; want 0 (buffered)", n)
		}
		time.Sleep(flushDelay) // synctest: virtual time
		synctest.Wait()
		if n := buf.Len(); n == 0 {
			t.Errorf("bytes written after the flush delay = 0; want the record")
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

type recFailWriter struct{ err error }

func (f recFailWriter) Write([]byte) (int, error) { return 0, f.err }

func TestRecorderCloseReturnsWriteError(t *testing.T) {
	boom := errors.New("disk full")
	rec := NewRecorder(NewEncoder(recFailWriter{boom}), 1)
	for range 3 {
		rec.Attempt(&Attempt{Client: "1"}) // must not block after the error
	}
	err := rec.Close()
	if !errors.Is(err, boom) {
		t.Errorf("Close() = %v; want an error wrapping %v", err, boom)
	}
	if err2 := rec.Close(); err2 != err {
		t.Errorf("second Close() = %v; want %v", err2, err)
	}
}

// TestRecorderFailedSignalsTheFirstWriteError: a run can stop at the first
// write error instead of going on without a timeline.
func TestRecorderFailedSignalsTheFirstWriteError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("disk full")
		rec := NewRecorder(NewEncoder(recFailWriter{boom}), 1)
		select {
		case <-rec.Failed():
			t.Fatal("Failed closed before any write")
		default:
		}
		if rec.Err() != nil {
			t.Fatalf("Err() = %v before any write", rec.Err())
		}
		rec.Attempt(&Attempt{Client: "1"})
		<-rec.Failed() // the flush delay passes in virtual time
		if !errors.Is(rec.Err(), boom) {
			t.Errorf("Err() = %v; want %v", rec.Err(), boom)
		}
		rec.Close()
	})
}

// TestRecorderFlushesWhileBusy: a steady stream is flushed within the
// flush delay, not only when it stops.
func TestRecorderFlushesWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		rec := NewRecorder(NewEncoder(&buf), 1024)
		start := time.Now()
		for time.Since(start) < 2*flushDelay {
			rec.Attempt(&Attempt{Client: "1", Key: "1/0"})
			time.Sleep(time.Millisecond) // synctest, virtual time: 200 records: less than the 64 KiB buffer
		}
		if buf.Len() == 0 {
			t.Errorf("bytes written during %v of steady records = 0; want flushes", 2*flushDelay)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Sync returns once every record queued before it is in the writer,
// without waiting for the flush delay, and the Recorder goes on.
func TestRecorderSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf lockedBuffer
		enc := NewEncoder(&buf)
		rec := NewRecorder(enc, 64)
		for i := range 10 {
			rec.Attempt(&Attempt{Client: "c", Key: fmt.Sprint(i), Attempt: 1})
		}
		start := time.Now()
		if err := rec.Sync(); err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(buf.bytes(), []byte("\n")); n != 10 || time.Since(start) != 0 {
			t.Errorf("after Sync: %d records in the writer, %v later; want 10 at once", n, time.Since(start))
		}
		rec.Attempt(&Attempt{Client: "c", Key: "late", Attempt: 1})
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(buf.bytes(), []byte("\n")); n != 11 {
			t.Errorf("after Close: %d records; want 11", n)
		}
	})
}

// lockedBuffer is a bytes.Buffer safe for the Recorder's goroutine and
// the test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}
