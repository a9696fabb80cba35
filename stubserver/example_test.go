package stubserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// A stub in an outage for a minute, recording every attempt.
func Example() {
	cfg := stubserver.Config{Phases: []stubserver.Phase{
		{Name: "outage", For: time.Minute,
			Respond:    stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503},
			RetryAfter: stubserver.RetryAfter{Form: stubserver.FormDelta, Fixed: 2 * time.Second}},
		{Name: "recovered"},
	}}
	var buf bytes.Buffer
	rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 64)
	s, err := stubserver.New(cfg, stubserver.Options{Recorder: rec})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go s.Serve(l)

	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Get("http://" + l.Addr().String() + stubserver.RequestPath(7, 0))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "Retry-After:", resp.Header.Get("Retry-After"))
	tr.CloseIdleConnections()

	s.Shutdown(context.Background())
	rec.Close()

	var r timeline.Record
	dec := timeline.NewDecoder(&buf)
	for dec.Decode(&r) == nil {
		a := r.Attempt
		fmt.Printf("client %s key %s attempt %d: %d in %s, next not before +%v\n",
			a.Client, a.Key, a.Attempt, a.Status, a.Phase, time.Duration(a.NotBefore-a.At))
	}
	// Output:
	// 503 Service Unavailable Retry-After: 2
	// client 7 key 7/0 attempt 1: 503 in outage, next not before +2s
}

func ExampleConfig_Validate() {
	cfg := stubserver.Config{Phases: []stubserver.Phase{
		{Name: "outage", Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503},
			RetryAfter: stubserver.RetryAfter{Form: "dat"}},
		{Name: "recovered"},
	}}
	fmt.Println(cfg.Validate())
	// Output:
	// stubserver: phases[0].for: missing or zero; only the last phase may last forever
	// stubserver: phases[0].retry_after.form: unknown form "dat" (want none, delta, date, negative, garbage, past-date, fractional, huge)
}
