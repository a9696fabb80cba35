package retrylabtest_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// TestMetaFromScenarios: a retrylabtest run's meta record is the one the
// scenarios package builds for the scenario (scenarios.Scenario.Meta), as
// `run`'s and `serve`'s are: phases, the quota with its default burst,
// expectations, source and schedule.
func TestMetaFromScenarios(t *testing.T) {
	sc, err := scenarios.Builtin("quota-steady")
	if err != nil {
		t.Fatal(err)
	}
	q := *sc.Server.Quota
	q.Limits = []stubserver.Limit{q.Limits[0]}
	q.Limits[0].Burst = 0 // the stub's default, the limit, must be recorded
	sc.Server.Quota = &q
	sc.Fleet.Clients, sc.Fleet.Requests, sc.Duration = 2, 1, 2*time.Second

	res := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered("retrylab"))
	var rec timeline.Record
	if err := timeline.NewDecoder(bytes.NewReader(res.Timeline)).Decode(&rec); err != nil || rec.Meta == nil {
		t.Fatalf("first record: %v, %+v; want the meta record", err, rec)
	}
	got, want := rec.Meta, sc.Meta(scenarios.MetaOptions{})
	for _, f := range []struct {
		field     string
		got, want any
	}{
		{"phases", got.Phases, want.Phases},
		{"quota", got.Quota, want.Quota},
		{"expect", got.Expect, want.Expect},
		{"source", string(got.Source), string(want.Source)},
		{"scheduled", got.Scheduled, want.Scheduled},
		{"fleet", got.Fleet, want.Fleet},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			g, _ := json.Marshal(f.got)
			w, _ := json.Marshal(f.want)
			t.Errorf("%s: the run recorded %s; the scenarios builder makes %s", f.field, g, w)
		}
	}
	if got.Quota == nil || got.Quota.Burst != int(q.Limits[0].Limit) {
		t.Errorf("quota %+v; want burst %v, the stub's default", got.Quota, q.Limits[0].Limit)
	}
}
