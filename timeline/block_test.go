package timeline

import (
	"bytes"
	"io"
	"reflect"
	"testing"
)

// TestDecodeIn: DecodeIn decodes what Decode does; the strings it sets
// point into the block, which Reset reuses: once the block has grown to
// the records decoded between two Resets, decoding allocates nothing.
func TestDecodeIn(t *testing.T) {
	data := benchStream(2000)
	var want []Record
	dec := NewDecoder(bytes.NewReader(data))
	for {
		var r Record
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	dec = NewDecoder(bytes.NewReader(data))
	var blk Block
	recs := make([]Record, 500)
	n := 0
	for n < len(want) {
		blk.Reset()
		for i := range recs {
			if err := dec.DecodeIn(&recs[i], &blk); err != nil {
				t.Fatalf("record %d: %v", n+i, err)
			}
		}
		for i := range recs {
			if !reflect.DeepEqual(recs[i], want[n+i]) {
				t.Fatalf("record %d = %+v; want %+v", n+i, recs[i], want[n+i])
			}
		}
		n += len(recs)
	}
	// Once the block is as large as the text between two Resets, it is
	// reused: decoding allocates nothing.
	// (Decode allocates a 32 KiB block per ~200 of these lines.)
	dec = NewDecoder(bytes.NewReader(bytes.Repeat(data[:bytes.IndexByte(data, '\n')+1], 25*len(recs))))
	allocs := testing.AllocsPerRun(20, func() {
		blk.Reset()
		for i := range recs {
			if err := dec.DecodeIn(&recs[i], &blk); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("DecodeIn allocates %v times per %d records; want 0", allocs, len(recs))
	}
	if recs[len(recs)-1].Attempt != want[0].Attempt {
		t.Errorf("record = %+v; want %+v", recs[len(recs)-1].Attempt, want[0].Attempt)
	}
}
