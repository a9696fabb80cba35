package timeline

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"testing"
	"time"
)

// benchStream is n attempt records shaped like a run's: short client ids and
// keys, a path, a 503 with a Retry-After on every other line.
func benchStream(n int) []byte {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for i := range n {
		c := strconv.Itoa(i % 1000)
		a := Attempt{Client: c, Key: c + "/" + strconv.Itoa(i/1000), Attempt: 1 + i%3, Method: "GET",
			Path: "/c/" + c + "/r/" + strconv.Itoa(i/1000), At: int64(i) * 60000, Done: int64(i)*60000 + 2000000,
			Status: 200, Phase: "recovered"}
		if i%2 == 0 {
			a.Status, a.Phase, a.RetryAfter, a.NotBefore, a.HasNotBefore = 503, "outage", "1", a.Done+int64(time.Second), true
		}
		enc.EncodeAttempt(&a)
	}
	enc.Flush()
	return buf.Bytes()
}

// BenchmarkDecode compares the hand-written decoder with encoding/json on
// the same stream; the metric is records per second.
func BenchmarkDecode(b *testing.B) {
	const n = 100_000
	data := benchStream(n)
	b.Run("timeline", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var rec Record
		for range b.N {
			dec := NewDecoder(bytes.NewReader(data))
			for {
				if err := dec.Decode(&rec); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	for _, workers := range []int{1, 2} {
		b.Run("batches-"+strconv.Itoa(workers), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for range b.N {
				dec := NewDecoder(bytes.NewReader(data))
				if err := dec.DecodeBatches(workers, true, func([]Record) {}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		type rec struct {
			Type string `json:"type"`
			Attempt
			NotBefore int64 `json:"not_before"`
		}
		for range b.N {
			dec := json.NewDecoder(bytes.NewReader(data))
			for {
				var r rec
				if err := dec.Decode(&r); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
