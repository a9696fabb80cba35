package clientredis_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientredis"
)

// Four processes of one application share a published quota of 200
// requests/s: each gives the Transport the same Redis-shared bucket at 80%
// of it, and says how many processes there are, for when Redis is away.
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // Options.Timeout then reaches the socket
	})
	defer rdb.Close()

	lim, err := clientredis.New(rdb, clientredis.Options{
		Rate:      200 * client.DefaultQuotaShare, // for the four processes together
		Burst:     10,
		Processes: 4, // alone, each paces at 40/s
		// Observer: a clientprom.Observer, also the Transport's, counts
		// fallbacks to local pacing.
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	hc := &http.Client{Transport: client.New(nil, client.Config{Limiter: lim, Quota: 200})}
	_ = hc // hc.Get(...) now paces with the other processes
}

type printEvents struct{}

func (printEvents) LimiterFallback(e client.LimiterEvent) {
	if e.FellBack {
		fmt.Printf("fell back on key %s: pacing locally at %v permits/s\n", e.Key, e.Rate)
	} else {
		fmt.Printf("recovered on key %s\n", e.Key)
	}
}

// Without Redis, permits come from a local bucket at Rate/Processes, and
// the Observer is told; the caller sees no error.
func Example_fallback() {
	// An address where nothing listens.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	addr := l.Addr().String()
	l.Close()

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	lim, err := clientredis.New(rdb, clientredis.Options{Rate: 100, Burst: 4, Processes: 4, Observer: printEvents{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Now()
	for range 3 {
		wait, _, err := lim.Reserve(context.Background(), "api.test", now)
		fmt.Println("wait", wait, "error", err)
	}
	// Output:
	// fell back on key api.test: pacing locally at 25 permits/s
	// wait 0s error <nil>
	// wait 40ms error <nil>
	// wait 80ms error <nil>
}
