package timeline

import (
	"runtime"
	"sync"
	"time"
)

// flushDelay is how long a Recorder lets encoded records sit in the
// encoder's buffer before it flushes them, so a live recording can be
// followed without a write per record under load.
const flushDelay = 100 * time.Millisecond

// item is one record on its way to the encoding goroutine.
type item struct {
	outcome bool
	a       Attempt
	o       Outcome
	synced  chan struct{} // Sync's marker: closed once every earlier record is flushed
}

// A Recorder hands records from many goroutines to one goroutine that
// encodes them, so the callers (the stub server's handlers, the fleet) never
// wait for disk I/O — only for room in the buffer. It never drops a record:
// when the buffer is full, Attempt and Outcome block until there is room.
//
// Records are written in the order the calls returned. The Recorder
// flushes the encoder about 100 ms after the first record it has not
// flushed yet (so a live recording can be followed) and on Close.
// Attempt and Outcome are safe for concurrent use; they must not be called
// after (or concurrently with) Close.
type Recorder struct {
	enc  *Encoder
	ch   chan item
	done chan struct{}
	once sync.Once
	err  error // first write error; read after done is closed

	failed   chan struct{} // closed at the first write error
	failOnce sync.Once
	errMu    sync.Mutex
	firstErr error // the error that closed failed
}

// NewRecorder starts a Recorder writing to enc with room for buffer records
// in flight (at least 1). The caller writes the meta record with
// enc.EncodeMeta before, and must not use enc until Close returns.
func NewRecorder(enc *Encoder, buffer int) *Recorder {
	if buffer < 1 {
		buffer = 1
	}
	r := &Recorder{enc: enc, ch: make(chan item, buffer), done: make(chan struct{}), failed: make(chan struct{})}
	go r.loop()
	return r
}

// Attempt queues a copy of a for encoding; a may be reused when it returns.
func (r *Recorder) Attempt(a *Attempt) {
	r.ch <- item{a: *a}
}

// Outcome queues a copy of o for encoding; o may be reused when it returns.
func (r *Recorder) Outcome(o *Outcome) {
	r.ch <- item{outcome: true, o: *o}
}

// Sync waits until every record queued before it is encoded and the
// encoder flushed, and returns the first write error so far. It is safe
// for concurrent use with Attempt and Outcome, and must not be called
// after (or concurrently with) Close.
func (r *Recorder) Sync() error {
	done := make(chan struct{})
	r.ch <- item{synced: done}
	<-done
	return r.Err()
}

// Failed returns a channel closed at the first write error, so a run can
// stop instead of going on without a timeline; Err then says what failed.
func (r *Recorder) Failed() <-chan struct{} { return r.failed }

// Err returns the first write error so far, or nil.
func (r *Recorder) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.firstErr
}

func (r *Recorder) fail(err error) {
	r.failOnce.Do(func() {
		r.errMu.Lock()
		r.firstErr = err
		r.errMu.Unlock()
		close(r.failed)
	})
}

// Close waits until every queued record is encoded, flushes the encoder, and
// returns the first write error, if any. It does not close the encoder's
// writer. Calling Close again returns the same error.
func (r *Recorder) Close() error {
	r.once.Do(func() { close(r.ch) })
	<-r.done
	return r.err
}

// pollNap is how long the encoding goroutine naps between drains while
// records keep coming. Napping instead of parking on the channel means a
// busy producer's send is a plain buffered copy: nobody has to be woken
// per record.
const pollNap = time.Millisecond

func (r *Recorder) loop() {
	defer close(r.done)
	var (
		timer   = time.NewTimer(flushDelay)
		pending bool // encoded but not flushed
	)
	timer.Stop()
	flush := func() {
		pending = false
		timer.Stop()
		if err := r.enc.Flush(); err != nil && r.err == nil {
			r.err = err
			r.fail(err)
		}
	}
	record := func(it *item) {
		if it.synced != nil {
			flush()
			close(it.synced)
			return
		}
		var err error
		if it.outcome {
			err = r.enc.EncodeOutcome(&it.o)
		} else {
			err = r.enc.EncodeAttempt(&it.a)
		}
		if err != nil && r.err == nil {
			r.err = err
			r.fail(err)
		}
		if !pending {
			pending = true
			timer.Reset(flushDelay)
		}
	}
	for {
		// Idle: park until a record or the flush deadline.
		select {
		case it, ok := <-r.ch:
			if !ok {
				flush()
				return
			}
			record(&it)
		case <-timer.C:
			flush()
			continue
		}
		// Busy: drain, nap, drain again, until a nap brings nothing.
		for {
			n := 0
		drain:
			for {
				select {
				case it, ok := <-r.ch:
					if !ok {
						flush()
						return
					}
					record(&it)
					n++
				default:
					break drain
				}
			}
			if n == 0 {
				break
			}
			select {
			case <-timer.C:
				flush()
			default:
			}
			if n >= cap(r.ch)/2 {
				// The buffer fills faster than a nap: napping would block
				// the producers. Keep draining.
				runtime.Gosched()
				continue
			}
			time.Sleep(pollNap)
		}
	}
}
