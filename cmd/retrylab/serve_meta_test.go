package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// TestServeMetaMatchesRun records every built-in scenario, and one whose
// quota writes no burst, with `serve` and with a (virtual) run, and holds
// the two meta records to the same scenario facts: one builder,
// scenarios.Scenario.Meta, makes both. The quota's burst is among them
// (serve once left it 0 when the scenario wrote none, while the stub
// enforces a burst of the limit).
func TestServeMetaMatchesRun(t *testing.T) {
	names := append(scenarios.BuiltinNames(), "quota-no-burst")
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var sc *scenarios.Scenario
			var err error
			if name == "quota-no-burst" {
				sc, err = scenarios.Builtin("quota-steady")
				if err == nil {
					q := *sc.Server.Quota
					q.Limits = []stubserver.Limit{q.Limits[0]}
					q.Limits[0].Burst = 0
					sc.Name, sc.Server.Quota = name, &q
				}
			} else {
				sc, err = scenarios.Builtin(name)
			}
			if err != nil {
				t.Fatal(err)
			}
			// A small fleet, short, written into the scenario itself so
			// that both recordings carry the same source.
			sc.Fleet.Clients, sc.Fleet.Requests, sc.Duration = 1, 1, time.Second
			src, err := json.Marshal(sc)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), name+".yaml")
			if err := os.WriteFile(file, src, 0o644); err != nil {
				t.Fatal(err)
			}
			served := serveRecordingMeta(t, file)
			ran := runMeta(t, sc)

			if served.Recorder != "serve" || ran.Recorder != "run" {
				t.Fatalf("recorders %q and %q; want serve and run", served.Recorder, ran.Recorder)
			}
			for _, f := range []struct {
				field     string
				got, want any
			}{
				{"scenario", served.Scenario, ran.Scenario},
				{"description", served.Description, ran.Description},
				{"phases", served.Phases, ran.Phases},
				{"quota", served.Quota, ran.Quota},
				{"limits", served.Limits, ran.Limits},
				{"expect", served.Expect, ran.Expect},
				{"source", string(served.Source), string(ran.Source)},
				{"seed", served.Seed, ran.Seed},
			} {
				if !reflect.DeepEqual(f.got, f.want) {
					t.Errorf("%s: serve recorded %s; run recorded %s", f.field, show(f.got), show(f.want))
				}
			}
			if q := sc.Server.Quota; q != nil {
				limits := q.Limits
				for _, tier := range q.Tiers {
					limits = append(limits, tier.Limits...)
				}
				if len(served.Limits) != len(limits) || served.Quota == nil {
					t.Fatalf("serve recorded limits %s, quota %s; want the scenario's %d limits and one to pace by", show(served.Limits), show(served.Quota), len(limits))
				}
				for i, l := range limits {
					want := l.Burst
					if want == 0 || (l.Algorithm != stubserver.AlgTokenBucket && l.Algorithm != stubserver.AlgLeakyBucket) {
						want = int(l.Limit) // the stub's default; a window admits its limit at once
					}
					if served.Limits[i].Burst != want {
						t.Errorf("serve's limit %d %s; want burst %d", i, show(served.Limits[i]), want)
					}
				}
			}
			// What serve does not share: it schedules nothing and its
			// clients are not the scenario's fleet.
			if served.Scheduled != 0 || served.Fleet != nil || served.Duration != 0 {
				t.Errorf("serve recorded scheduled %d, fleet %s, duration %d; want none", served.Scheduled, show(served.Fleet), served.Duration)
			}
			if ran.Scheduled == 0 || ran.Fleet == nil {
				t.Errorf("run recorded scheduled %d, fleet %s; want the fleet's", ran.Scheduled, show(ran.Fleet))
			}
		})
	}
}

// TestServeMetaDefault: the default server (no --scenario) is no scenario
// file, so its record names no source, but its quota has its burst.
func TestServeMetaDefault(t *testing.T) {
	m := serveRecordingMeta(t, "")
	if m.Scenario != "default" || m.Source != nil || m.Quota == nil || m.Quota.Burst != 10 || len(m.Phases) != 9 {
		t.Errorf("default serve meta: scenario %q, source %q, quota %s, %d phases; want default, none, burst 10, 9 phases",
			m.Scenario, m.Source, show(m.Quota), len(m.Phases))
	}
}

// serveRecordingMeta runs `serve` (with --scenario name unless "") under a
// context already done, so it stops at once, and returns the meta record
// of its recording.
func serveRecordingMeta(t *testing.T, name string) timeline.Meta {
	t.Helper()
	record := filepath.Join(t.TempDir(), "serve.ndjson")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	args := []string{"serve", "--addr", "127.0.0.1:0", "--record", record, "--seed", "1"}
	if name != "" {
		args = append(args, "--scenario", name)
	}
	if code, _, stderr := runCmdCtx(t, ctx, args...); code != 0 {
		t.Fatalf("serve: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	return firstMeta(t, b)
}

// runMeta runs sc in virtual time with seed 1 and returns its meta record.
func runMeta(t *testing.T, sc *scenarios.Scenario) timeline.Meta {
	t.Helper()
	var buf bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		_, err := runner.Run(context.Background(), sc, runner.RunOptions{
			Seed: 1, Timeline: &buf, Virtual: true,
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	return firstMeta(t, buf.Bytes())
}

func firstMeta(t *testing.T, b []byte) timeline.Meta {
	t.Helper()
	var rec timeline.Record
	if err := timeline.NewDecoder(bytes.NewReader(b)).Decode(&rec); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if rec.Type != timeline.TypeMeta || rec.Meta == nil {
		t.Fatalf("first record %q; want the meta record", rec.Type)
	}
	return *rec.Meta
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
