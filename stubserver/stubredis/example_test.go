package stubredis_test

import (
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/stubserver/stubredis"
)

// A stub whose layered quota lives in Redis: every stub made so, with the
// same prefix, enforces one quota. Nothing contacts Redis before the first
// request.
func Example() {
	backend := "redis://127.0.0.1:6379/0?timeout=80ms"
	ro, o, err := stubredis.ParseURL(backend)
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(ro)
	defer rdb.Close()
	o.Prefix = stubredis.DefaultPrefix + "my-scenario:"

	cfg := stubserver.Config{
		Headers: stubserver.HeadersIETF,
		Quota: &stubserver.Quota{
			Limits: []stubserver.Limit{
				{Name: "second", Limit: 10, Per: time.Second, Burst: 20},
				{Name: "minute", Algorithm: stubserver.AlgSlidingWindow, Limit: 300, Per: time.Minute},
			},
			Backend: backend,
			OnError: stubserver.OnErrorClosed, // 503 with Retry-After 1 while Redis fails
		},
		Phases: []stubserver.Phase{{Respond: stubserver.Respond{Kind: stubserver.RespondQuota}}},
	}
	srv, err := stubserver.New(cfg, stubserver.Options{NewLimiter: stubredis.New(rdb, o)})
	if err != nil {
		log.Fatal(err)
	}
	_ = srv // srv.Serve(listener)
	fmt.Println(ro.Addr, o.Timeout, o.Prefix)
	// Output: 127.0.0.1:6379 80ms retrylab:quota:my-scenario:
}
