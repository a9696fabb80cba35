package runner

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/timeline"
)

// checkNoise fails unless n is a measurement from the sources want (joined
// by "+"): samples, and ordered, non-negative quantiles.
func checkNoise(t *testing.T, n *timeline.Noise, want string) {
	t.Helper()
	if n == nil {
		t.Fatal("end.Noise = nil; want the host's noise measured")
	}
	t.Logf("noise %+v", *n)
	if n.Source != want {
		t.Errorf("noise source %q; want %q", n.Source, want)
	}
	if n.Samples <= 0 || n.P50 < 0 || n.P50 > n.P99 || n.P99 > n.Max {
		t.Errorf("noise samples %d, p50 %d, p99 %d, max %d; want samples and 0 <= p50 <= p99 <= max", n.Samples, n.P50, n.P99, n.Max)
	}
	if n.CPUPressure < 0 || n.CPUPressure > 100 {
		t.Errorf("noise CPU pressure %v; want a percentage", n.CPUPressure)
	}
}

// A virtual run has no host noise: nothing is measured, and the end
// record says so by having none.
func TestRunNoiseVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, smallOutage)
		var buf bytes.Buffer
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 7, Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		_, end := decodeEnd(t, buf.Bytes())
		if end.Noise != nil || sum.End.Noise != nil {
			t.Errorf("end.Noise = %+v, Summary.End.Noise = %+v; want none in a virtual run", end.Noise, sum.End.Noise)
		}
		if bytes.Contains(buf.Bytes(), []byte(`"noise"`)) {
			t.Error(`the timeline has a "noise" field`)
		}
	})
}

// An exec fleet's run also runs the probe process (this test binary run
// again as one, probeCommand), which sees what the fleet's processes see; the stub
// stamps the requests they sent.
func TestRunNoiseExec(t *testing.T) {
	sc := mustParse(t, `
duration: 1500ms
server: {phases: [{respond: ok}]}
fleet: {clients: 2, requests: 1, timeout: 10s}
`)
	var buf bytes.Buffer
	if _, err := Run(t.Context(), sc, RunOptions{Subject: fakeProgram(t, "send-hang"), Timeline: &buf, Probe: probeCommand(t)}); err != nil {
		t.Fatal(err)
	}
	_, end := decodeEnd(t, buf.Bytes())
	checkNoise(t, end.Noise, strings.Join([]string{timeline.NoiseSched, timeline.NoiseSleep, timeline.NoiseProbe, timeline.NoiseStamp}, "+"))
}

// probeCommand is the command line of a noise probe: this test binary,
// which TestMain turns into one.
func probeCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, noise.ProbeArg}
}
