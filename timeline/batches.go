package timeline

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// chunkSize is how much text a worker of DecodeBatches parses at once: whole
// lines, so that a chunk needs nothing of its neighbours.
const chunkSize = 128 << 10

// A chunk is a run of whole lines and the records parsed from them.
type chunk struct {
	text  []byte
	recs  []Record
	lines []int32 // the line of each record in recs, 1 = the chunk's first
	nline int     // lines in text
	err   error   // what stopped the parse, at line errAt (recs holds those before it)
	errAt int
	// readErr is the read error that ended the stream after this chunk
	readErr error
	done    chan struct{}
}

// DecodeBatches reads the rest of the stream, parsing it on workers
// goroutines, and hands its records to fn on the caller's goroutine, in
// stream order, a batch at a time. The records are valid only during the
// fn call that has them (their storage is reused). With borrow their
// strings are too (they point into the text, reused once fn returns);
// without, the strings stay valid, as Decode's.
//
// It returns nil at the end of the stream, and otherwise the error Decode
// would have returned at the same place (a *SyntaxError naming the line),
// after fn has had every record before it. All its goroutines have ended
// when it returns.
func (d *Decoder) DecodeBatches(workers int, borrow bool, fn func([]Record)) error {
	workers = max(workers, 1)
	nchunks := 2*workers + 2
	free := make(chan *chunk, nchunks)
	for range nchunks {
		free <- &chunk{done: make(chan struct{}, 1)}
	}
	work := make(chan *chunk, nchunks)
	ordered := make(chan *chunk, nchunks)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { d.split(free, work, ordered, quit) })
	for range workers {
		wg.Go(func() {
			p := &parser{inPlace: borrow}
			for c := range work {
				p.chunk(c)
				c.done <- struct{}{}
			}
		})
	}
	err := d.deliver(ordered, free, fn)
	close(quit)
	for c := range ordered { // let split see quit and close the channels
		<-c.done
	}
	wg.Wait()
	return err
}

// deliver hands the parsed chunks to fn in order and recycles them.
func (d *Decoder) deliver(ordered <-chan *chunk, free chan<- *chunk, fn func([]Record)) error {
	for c := range ordered {
		<-c.done
		base := d.line
		n := len(c.lines)
		for i := range n {
			d.line = base + int(c.lines[i])
			if err := d.order(c.recs[i].Type); err != nil {
				if i > 0 {
					fn(c.recs[:i])
				}
				return &SyntaxError{Line: d.line, Msg: err.Error()}
			}
		}
		if n > 0 {
			fn(c.recs[:n])
		}
		if c.err != nil {
			d.line = base + c.errAt
			return &SyntaxError{Line: d.line, Msg: c.err.Error()}
		}
		d.line = base + c.nline
		if c.readErr != nil {
			return fmt.Errorf("timeline: line %d: read: %w", d.line+1, c.readErr)
		}
		free <- c
	}
	return nil
}

// split reads the stream into chunks of whole lines, in order, for the
// workers (work) and for deliver (ordered).
func (d *Decoder) split(free <-chan *chunk, work, ordered chan<- *chunk, quit <-chan struct{}) {
	defer close(ordered)
	defer close(work)
	var carry []byte // the start of a line the last chunk cut
	for {
		var c *chunk
		select {
		case c = <-free:
		case <-quit:
			return
		}
		if c.text == nil {
			c.text = make([]byte, 0, d.chunkSize())
		}
		c.text = append(c.text[:0], carry...)
		c.readErr = nil
		end, err := d.fill(c)
		if err != nil && err != io.EOF {
			c.readErr = err
		}
		carry = append(carry[:0], c.text[end:]...)
		c.text = c.text[:end]
		select {
		case work <- c:
		case <-quit:
			return
		}
		ordered <- c // never blocks: it has room for every chunk
		if err != nil {
			return
		}
	}
}

// fill reads into c.text until it is full and holds a whole line
// (growing it for a longer line), or the stream ends, and returns where
// its last whole line ends, and the read error (io.EOF at the end, when
// the rest is the last line).
func (d *Decoder) fill(c *chunk) (end int, err error) {
	searched := 0
	for {
		if len(c.text) == cap(c.text) {
			if i := bytes.LastIndexByte(c.text[searched:], '\n'); i >= 0 {
				return searched + i + 1, nil
			}
			searched = len(c.text)
			c.text = append(c.text, make([]byte, max(cap(c.text), 1))...)[:searched]
		}
		var n int
		n, err = d.r.Read(c.text[len(c.text):cap(c.text)])
		c.text = c.text[:len(c.text)+n]
		switch {
		case err == io.EOF:
			return len(c.text), err
		case err != nil: // what follows the last newline is lost with the stream
			return bytes.LastIndexByte(c.text, '\n') + 1, err
		}
	}
}

// chunkSize is the text DecodeBatches parses at once (a test sets it small).
func (d *Decoder) chunkSize() int {
	if d.chunk > 0 {
		return d.chunk
	}
	return chunkSize
}

// chunk parses the lines of c.
func (p *parser) chunk(c *chunk) {
	c.recs, c.lines, c.err, c.errAt = c.recs[:0], c.lines[:0], nil, 0
	text, line := c.text, 0
	for len(text) > 0 {
		var l []byte
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			l, text = text[:i], text[i+1:]
		} else {
			l, text = text, nil
		}
		line++
		if l = bytes.TrimSpace(l); len(l) == 0 {
			continue
		}
		if len(c.recs) < cap(c.recs) {
			c.recs = c.recs[:len(c.recs)+1]
		} else {
			c.recs = append(c.recs, Record{})
		}
		if err := p.record(l, &c.recs[len(c.recs)-1]); err != nil {
			c.recs = c.recs[:len(c.recs)-1]
			c.err, c.errAt = err, line
			break
		}
		c.lines = append(c.lines, int32(line))
	}
	c.nline = line
}
