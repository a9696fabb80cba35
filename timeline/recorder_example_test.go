package timeline_test

import (
	"fmt"
	"os"
	"sync"

	"github.com/retrylab/retrylab/timeline"
)

// Many goroutines record; one goroutine encodes. Close drains and flushes.
func ExampleRecorder() {
	enc := timeline.NewEncoder(os.Stdout)
	enc.EncodeMeta(&timeline.Meta{Format: timeline.Format, Recorder: "serve", Scenario: "demo"})
	rec := timeline.NewRecorder(enc, 1024)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			rec.Attempt(&timeline.Attempt{Client: "1", Key: "1/0", Attempt: 1, Method: "GET", Path: "/c/1/r/0", At: int64(i), Status: 429})
		})
		wg.Wait() // one at a time, so the output order is fixed
	}
	if err := rec.Close(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"type":"meta","format":1,"recorder":"serve","scenario":"demo","seed":0,"start":"0001-01-01T00:00:00Z"}
	// {"type":"attempt","client":"1","key":"1/0","attempt":1,"method":"GET","path":"/c/1/r/0","at":0,"done":0,"status":429}
	// {"type":"attempt","client":"1","key":"1/0","attempt":1,"method":"GET","path":"/c/1/r/0","at":1,"done":0,"status":429}
}
