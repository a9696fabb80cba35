package timeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// An Encoder writes records as NDJSON, one record a line. It buffers: call
// Flush (or Close) to push what it holds to the writer. An Encoder is not safe
// for concurrent use; a server with many handlers funnels records to one
// encoding goroutine.
type Encoder struct {
	w   *bufio.Writer
	buf []byte
	err error
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{w: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 512)}
}

// EncodeMeta writes the meta record. It belongs first in a stream.
func (e *Encoder) EncodeMeta(m *Meta) error { return e.encodeJSON(TypeMeta, m) }

// EncodeEnd writes the end record. It belongs last in a stream.
func (e *Encoder) EncodeEnd(end *End) error { return e.encodeJSON(TypeEnd, end) }

// encodeJSON writes a rare record (meta, end) through encoding/json, its
// type first.
func (e *Encoder) encodeJSON(typ string, v any) error {
	if e.err != nil {
		return e.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("timeline: encoding %s: %w", typ, err)
	}
	e.buf = append(e.buf[:0], `{"type":"`...)
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, `",`...)
	e.buf = append(e.buf, b[1:]...)
	e.buf = append(e.buf, '\n')
	return e.write()
}

// EncodeAttempt writes one attempt record.
func (e *Encoder) EncodeAttempt(a *Attempt) error {
	if e.err != nil {
		return e.err
	}
	e.buf = AppendAttempt(e.buf[:0], a)
	e.buf = append(e.buf, '\n')
	return e.write()
}

// EncodeOutcome writes one outcome record.
func (e *Encoder) EncodeOutcome(o *Outcome) error {
	if e.err != nil {
		return e.err
	}
	e.buf = AppendOutcome(e.buf[:0], o)
	e.buf = append(e.buf, '\n')
	return e.write()
}

// writeLine writes a record's line as it was read (Decoder.raw), which
// the decoder accepted.
func (e *Encoder) writeLine(line []byte) error {
	if e.err != nil {
		return e.err
	}
	if _, err := e.w.Write(line); err != nil {
		e.err = fmt.Errorf("timeline: write: %w", err)
		return e.err
	}
	if err := e.w.WriteByte('\n'); err != nil {
		e.err = fmt.Errorf("timeline: write: %w", err)
	}
	return e.err
}

func (e *Encoder) write() error {
	if _, err := e.w.Write(e.buf); err != nil {
		e.err = fmt.Errorf("timeline: write: %w", err)
	}
	return e.err
}

// Flush writes any buffered records to the underlying writer.
func (e *Encoder) Flush() error {
	if e.err != nil {
		return e.err
	}
	if err := e.w.Flush(); err != nil {
		e.err = fmt.Errorf("timeline: flush: %w", err)
	}
	return e.err
}

// AppendAttempt appends the JSON object of a (without a newline) to b.
func AppendAttempt(b []byte, a *Attempt) []byte {
	b = append(b, `{"type":"attempt","client":`...)
	b = appendString(b, a.Client)
	b = append(b, `,"key":`...)
	b = appendString(b, a.Key)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	b = append(b, `,"method":`...)
	b = appendString(b, a.Method)
	b = append(b, `,"path":`...)
	b = appendString(b, a.Path)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, a.At, 10)
	b = append(b, `,"done":`...)
	b = strconv.AppendInt(b, a.Done, 10)
	if a.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
	}
	if a.Fault != "" {
		b = append(b, `,"fault":`...)
		b = appendString(b, a.Fault)
	}
	if a.Phase != "" {
		b = append(b, `,"phase":`...)
		b = appendString(b, a.Phase)
	}
	if a.RetryAfter != "" {
		b = append(b, `,"retry_after":`...)
		b = appendString(b, a.RetryAfter)
	}
	if a.HasNotBefore {
		b = append(b, `,"not_before":`...)
		b = strconv.AppendInt(b, a.NotBefore, 10)
	}
	if a.Idempotent {
		b = append(b, `,"idem":true`...)
	}
	if a.IdemKey != "" {
		b = append(b, `,"idem_key":`...)
		b = appendString(b, a.IdemKey)
	}
	if a.Backend != "" {
		b = append(b, `,"backend":`...)
		b = appendString(b, a.Backend)
	}
	if a.RateLimit != "" {
		b = append(b, `,"ratelimit":`...)
		b = appendString(b, a.RateLimit)
	}
	if a.Limit != "" {
		b = append(b, `,"limit":`...)
		b = appendString(b, a.Limit)
	}
	if a.Queue != 0 {
		b = append(b, `,"queue":`...)
		b = strconv.AppendInt(b, a.Queue, 10)
	}
	if a.Service != 0 {
		b = append(b, `,"service":`...)
		b = strconv.AppendInt(b, a.Service, 10)
	}
	if a.Upstream != "" {
		b = append(b, `,"upstream":`...)
		b = appendString(b, a.Upstream)
	}
	if a.Waited != 0 {
		b = append(b, `,"waited":`...)
		b = strconv.AppendInt(b, a.Waited, 10)
	}
	if a.GRPCCode != "" {
		b = append(b, `,"grpc_code":`...)
		b = appendString(b, a.GRPCCode)
	}
	if a.Pushback != "" {
		b = append(b, `,"pushback":`...)
		b = appendString(b, a.Pushback)
	}
	if a.RetryInfo != "" {
		b = append(b, `,"retry_info":`...)
		b = appendString(b, a.RetryInfo)
	}
	if a.PreviousAttempts != 0 {
		b = append(b, `,"grpc_previous_attempts":`...)
		b = strconv.AppendInt(b, int64(a.PreviousAttempts), 10)
	}
	if a.WaitClaim != "" {
		b = append(b, `,"wait_claim":`...)
		b = appendString(b, a.WaitClaim)
	}
	return append(b, '}')
}

// AppendOutcome appends the JSON object of o (without a newline) to b.
func AppendOutcome(b []byte, o *Outcome) []byte {
	b = append(b, `{"type":"outcome","client":`...)
	b = appendString(b, o.Client)
	b = append(b, `,"key":`...)
	b = appendString(b, o.Key)
	b = append(b, `,"scheduled":`...)
	b = strconv.AppendInt(b, o.Scheduled, 10)
	b = append(b, `,"start":`...)
	b = strconv.AppendInt(b, o.Start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, o.End, 10)
	b = append(b, `,"result":`...)
	b = appendString(b, o.Result)
	if o.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(o.Status), 10)
	}
	if o.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(o.Attempts), 10)
	}
	if o.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, o.Error)
	}
	if o.Harness {
		b = append(b, `,"harness":true`...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string without allocating: quotes,
// backslashes and control characters are escaped, valid UTF-8 is copied
// as is, and invalid UTF-8 becomes U+FFFD, as encoding/json does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// A SyntaxError is a line of the stream that is not a valid record.
type SyntaxError struct {
	Line int    // 1-based line number in the stream
	Msg  string // what is wrong
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("timeline: line %d: %s", e.Line, e.Msg)
}

// Record is one decoded line. Type says which of the fields is valid. The
// decoder is strict: an unknown type, an impossible time or a record out of
// place (meta not first or twice, anything after the end record) is a
// *SyntaxError naming the line.
type Record struct {
	Type    string
	Meta    *Meta // a fresh value for each meta record
	End     *End  // a fresh value for each end record
	Attempt Attempt
	Outcome Outcome
}

// A Decoder reads records from an NDJSON stream. It is not safe for
// concurrent use.
type Decoder struct {
	r    *bufio.Reader
	line int
	long []byte
	p    parser

	records  int // records decoded so far
	metaLine int // line of the meta record, 0 before it
	endLine  int // line of the end record, 0 before it
	chunk    int // DecodeBatches' chunk size, when not the default (tests)
	// raw is the last record's line as read, trimmed: valid until the
	// next Decode (Merge copies the lines it need not change).
	raw []byte
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 256<<10)}
}

// Line is the number of the last line read (1-based; 0 before the first).
func (d *Decoder) Line() int { return d.line }

// Decode reads the next record into rec, reusing its storage. The strings
// it sets stay valid, but they share memory with neighbouring lines: a
// caller that keeps strings of many records (as map keys, say) should
// strings.Clone them, or each kept string holds a 32 KiB block. It returns
// io.EOF at the end of the stream and a *SyntaxError naming the line for a
// malformed or truncated record. Blank lines are skipped.
func (d *Decoder) Decode(rec *Record) error {
	for {
		line, err := d.readLine()
		if err != nil {
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if err := d.p.record(line, rec); err != nil {
			return &SyntaxError{Line: d.line, Msg: err.Error()}
		}
		if err := d.order(rec.Type); err != nil {
			return &SyntaxError{Line: d.line, Msg: err.Error()}
		}
		d.raw = line
		return nil
	}
}

// DecodeIn is Decode with the strings of rec (but those of a meta or end
// record, which are fresh values) carved from blk rather than from memory
// the Decoder allocates: they stay valid only until blk.Reset. A caller
// that decodes into a few records and blocks in turn, and resets a block
// once the records decoded into it are done with, decodes without
// allocating.
func (d *Decoder) DecodeIn(rec *Record, blk *Block) error {
	d.p.block = blk
	err := d.Decode(rec)
	d.p.block = nil
	return err
}

// A Block holds the text of the lines a Decoder decoded into it
// (DecodeIn), which the records' strings point into. The zero value is
// ready to use.
type Block struct {
	buf []byte
}

// Reset makes the block's memory reusable: the strings of every record
// decoded into it since the last Reset become invalid (they may change).
func (b *Block) Reset() { b.buf = b.buf[:0] }

// copy appends line to the block and returns it as a string. When the block
// is full it starts a larger one: the strings handed out keep the old one
// alive, and after a Reset the larger one serves alone.
func (b *Block) copy(line []byte) string {
	n := len(line)
	if n == 0 {
		return ""
	}
	if cap(b.buf)-len(b.buf) < n {
		b.buf = make([]byte, 0, max(2*cap(b.buf), arenaSize, n))
	}
	start := len(b.buf)
	b.buf = append(b.buf, line...)
	return unsafe.String(&b.buf[start], n)
}

// order enforces the stream's shape: at most one meta record, and only as
// the first record; at most one end record, last.
func (d *Decoder) order(typ string) error {
	d.records++
	switch {
	case d.endLine > 0:
		return fmt.Errorf("a record (%s) after the end record (line %d)", typ, d.endLine)
	case typ == TypeMeta && d.metaLine > 0:
		return fmt.Errorf("a second meta record (the first is line %d)", d.metaLine)
	case typ == TypeMeta && d.records > 1:
		return errors.New("the meta record must be the first record")
	}
	switch typ {
	case TypeMeta:
		d.metaLine = d.line
	case TypeEnd:
		d.endLine = d.line
	}
	return nil
}

// readLine returns the next line without its newline. A last line that is
// not terminated by a newline is still returned; a truncated record on it is
// caught by the parser.
func (d *Decoder) readLine() ([]byte, error) {
	line, err := d.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		d.long = append(d.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = d.r.ReadSlice('\n')
			d.long = append(d.long, line...)
		}
		line = d.long
	}
	if len(line) > 0 {
		d.line++
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("timeline: line %d: read: %w", d.line+1, err)
	}
	return bytes.TrimSuffix(line, []byte{'\n'}), nil
}

// errTruncated is what a record cut short says.
var errTruncated = errors.New("unexpected end of record (truncated line?)")
