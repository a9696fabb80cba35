package reports

import (
	"bytes"
	"io"
	"math"
	"testing"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// FuzzCollect feeds arbitrary timelines to the collector and draws every
// plot: malformed lines must be errors, odd values (negative or huge times,
// attempt numbers, unknown results) must draw without panicking, and the
// figures must stay consistent.
func FuzzCollect(f *testing.F) {
	var run bytes.Buffer
	if _, err := (synth{clients: 3, requests: 2, seed: 1}).write(&run); err != nil {
		f.Fatal(err)
	}
	f.Add(run.Bytes())
	f.Add(serveTimeline().Bytes())
	f.Add([]byte(`{"type":"meta","format":1,"recorder":"run","scenario":"x","seed":0,"start":"0001-01-01T00:00:00Z","policy":{"base":-5,"cap":-1,"jitter":"decorrelated"},"phases":[{"name":"a","start":-10,"end":-20,"respond":"ok"}],"fleet":{"clients":-3,"requests":1}}
{"type":"attempt","client":"-7","key":"k","attempt":-1,"method":"GET","path":"/","at":-5,"done":-9,"status":429,"not_before":-100}
{"type":"attempt","client":"-7","key":"k","attempt":2147483648,"method":"GET","path":"/","at":9223372036854775807,"done":-9223372036854775808,"retry_after":"-1"}
{"type":"attempt","client":"x","key":"k","attempt":3,"method":"GET","path":"/","at":5,"done":6,"status":999}
{"type":"outcome","client":"x","key":"k","start":9223372036854775807,"end":-9223372036854775808,"result":"weird"}
`))
	// A capacity model with odd values: negative and huge times, a phase
	// ending before it starts, shares out of range.
	f.Add([]byte(`{"type":"meta","format":1,"recorder":"run","scenario":"m","seed":0,"start":"2026-01-01T00:00:00Z","capacity":{"concurrency":-2,"queue":-5,"service":-3},"phases":[{"name":"s","start":0,"end":100,"respond":"ok"},{"name":"t","start":100,"end":50,"respond":"ok","capacity":0.3},{"name":"a","start":50,"respond":"ok","capacity":2}]}
{"type":"attempt","client":"a","key":"k","attempt":1,"method":"GET","path":"/","at":9223372036854775000,"done":1,"status":200,"queue":9223372036854775807,"service":9223372036854775807}
{"type":"attempt","client":"a","key":"k","attempt":2,"method":"GET","path":"/","at":-5,"done":0,"status":503,"limit":"capacity","queue":-7,"service":-1}
{"type":"attempt","client":"b","key":"b","attempt":1,"method":"GET","path":"/","at":120,"done":130,"status":200,"fault":"abandoned","queue":3,"service":5}
`))
	f.Add([]byte(`{"type":"attempt","client":"1","key":"1/0","attempt":1,"method":"GET","path":"/","at":0,"done":1}`))
	f.Add([]byte("{\"type\":\"nope\"}\n\n{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Collect(bytes.NewReader(data), Options{MaxClients: 5})
		if err != nil {
			return
		}
		s := c.Stats()
		if s.Attempts != s.OK+s.Throttled+s.Unavailable+s.OtherErrors+s.Faults {
			t.Errorf("attempts %d != sum of classes %+v", s.Attempts, s)
		}
		if s.EarlyRetries > s.RetryAfterRetries || s.BeyondBound > s.OwnDelays || s.Retries > s.Attempts {
			t.Errorf("inconsistent counts: %+v", s)
		}
		if s.Outcomes > 0 && (s.SuccessRate < 0 || s.SuccessRate > 1 || math.IsNaN(s.SuccessRate)) {
			t.Errorf("success rate %v out of [0, 1]", s.SuccessRate)
		}
		if len(c.rows) > 5 {
			t.Errorf("%d raster rows; want at most 5", len(c.rows))
		}
		for _, d := range c.plots() {
			if d.p == nil {
				continue
			}
			svg := vgsvg.New(d.w, d.h)
			d.p.Draw(draw.New(svg))
			if _, err := svg.WriteTo(io.Discard); err != nil {
				t.Errorf("%s: %v", d.Name, err)
			}
		}
		pd, err := c.page(&Report{Stats: s}, testVerdict())
		if err != nil {
			t.Fatalf("page: %v", err)
		}
		if err := templates.ExecuteTemplate(io.Discard, "report", pd); err != nil {
			t.Errorf("report template: %v", err)
		}
	})
}
