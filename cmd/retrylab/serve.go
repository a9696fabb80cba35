package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/stubserver/stubprom"
)

// defaultServe is the server `retrylab serve` runs without --scenario: one
// short phase per Retry-After form, then a quota, so a client meets every
// form a real provider (or a broken one) sends.
//
//go:embed default-serve.yaml
var defaultServe []byte

type serveOptions struct {
	scenario    string
	addr        string
	record      string
	force       bool
	start       string
	duration    time.Duration
	allowRemote bool
	noControl   bool
	seed        int64
	redis       string
	redisSet    bool // --redis was given
	upstream    string
	grpc        bool
	epoch       epochFlag
}

// --start values.
const (
	startNow          = "now"
	startFirstRequest = "first-request"
)

func cmdServe(ctx context.Context, e *env, args []string) error {
	o, err := parseServe(e, args)
	if err != nil {
		return err
	}
	sc, err := loadServeScenario(o.scenario)
	if err != nil {
		return badInput(err)
	}
	return serve(ctx, e, o, sc)
}

// parseServe reads and checks serve's flags.
func parseServe(e *env, args []string) (serveOptions, error) {
	var o serveOptions
	fs := newFlags("serve", e)
	fs.StringVar(&o.scenario, "scenario", "", "serve the server: section of this scenario, a `FILE|NAME` (a file or a built-in name; default: every Retry-After form in turn)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen `ADDR` (port 0 picks a free one)")
	fs.StringVarP(&o.record, "output", "o", "", "record the timeline of every request to `FILE` (NDJSON); an existing file is refused unless --force; each reset of the control API goes on in FILE with .2, .3, ... before its extension")
	fs.StringVar(&o.record, "record", "", "the old spelling of --output")
	fs.MarkDeprecated("record", "use -o/--output")
	fs.BoolVar(&o.force, "force", false, "overwrite an existing --output file")
	fs.StringVar(&o.start, "start", startNow, "`WHEN` the phases (and time zero) start: now (when listening) or first-request (the first recorded request; /metrics, /healthz and /_retrylab/ do not count)")
	fs.Var(&o.epoch, "epoch", "start the phases (and time zero) at this wall-clock `INSTANT` (RFC 3339, e.g. 2026-12-01T12:00:00Z), shared with the other replicas and 'run --epoch'; a request that arrives before it waits for it")
	fs.DurationVar(&o.duration, "duration", time.Hour, "stop by itself after this long, counted from the epoch when it is ahead (0: only on SIGINT/SIGTERM)")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow listening on a non-loopback address, and peers outside loopback to use the control API")
	fs.BoolVar(&o.noControl, "no-control", false, "serve no control API under /_retrylab/ (those paths are then a client's), and without -o record nothing: the stub at full speed")
	fs.Int64Var(&o.seed, "seed", 1, "seed for mixes and Retry-After spread")
	fs.StringVar(&o.redis, "redis", "", "keep the quota in Redis at `URL` (redis://HOST:PORT/DB[?timeout=50ms]), shared by every serve of the scenario on it; replaces the scenario's backend")
	fs.BoolVar(&o.grpc, "grpc", false, "speak gRPC instead of HTTP (the scenario's server.protocol: grpc): any method, the phases' statuses as gRPC codes (docs/grpc.md)")
	fs.StringVar(&o.upstream, "upstream", "", "forward ok phases, requests the quota admits and passthrough answers to the API at `URL` and relay its answers (replaces the scenario's server.upstream); serve still listens on loopback")
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	o.redisSet = fs.Changed("redis")
	if fs.Changed("upstream") {
		if _, err := stubserver.ParseUpstream(o.upstream); err != nil {
			return o, usagef("--upstream %s", strings.TrimPrefix(err.Error(), "stubserver: upstream: "))
		}
	}
	if fs.NArg() > 0 {
		return o, usagef("serve takes no arguments (got %q); use --scenario", fs.Args())
	}
	if o.duration < 0 {
		return o, usagef("--duration must be >= 0, got %v", o.duration)
	}
	if o.start != startNow && o.start != startFirstRequest {
		return o, usagef("--start %q: want %s or %s", o.start, startNow, startFirstRequest)
	}
	epoch := o.epoch.t
	if !epoch.IsZero() {
		if fs.Changed("start") {
			return o, usagef("--epoch and --start are exclusive: the epoch is when the phases start")
		}
		if ahead := time.Until(epoch); ahead > runner.MaxEpochAhead {
			return o, usagef("--epoch %s is %v ahead, more than %v", o.epoch.String(), ahead.Round(time.Second), runner.MaxEpochAhead)
		}
	}
	if err := checkLoopback("--addr", o.addr, o.allowRemote); err != nil {
		return o, err
	}
	if err := checkPort("--addr", o.addr); err != nil {
		return o, err
	}
	if o.record != "" && !o.force {
		if _, err := os.Lstat(o.record); err == nil {
			return o, usagef("--output %s: the file exists; pass --force to overwrite it", o.record)
		}
	}
	return o, nil
}

// serve serves sc's server under o until ctx ends or o.duration passes.
func serve(ctx context.Context, e *env, o serveOptions, sc *scenarios.Scenario) error {
	if o.grpc {
		sc.Server.Protocol = stubserver.ProtocolGRPC
		if err := sc.Server.Validate(); err != nil {
			return usagef("--grpc: scenario %q: %v", sc.Name, err)
		}
	}
	name, cfg := sc.Name, sc.Server
	if o.redisSet {
		if err := redisFlagErr(o.redis, cfg, name); err != nil {
			return err
		}
		cfg = withBackend(cfg, o.redis)
	}
	if o.upstream != "" {
		cfg.Upstream = o.upstream
	}
	newLimiter, closeBackend, err := quotaBackend(cfg, servePrefix(name))
	if err != nil {
		return err
	}
	defer closeBackend()
	if err := checkRedisReachable(ctx, cfg, name, o.redisSet); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		var ae *net.AddrError
		var de *net.DNSError
		if errors.As(err, &ae) || errors.As(err, &de) {
			return usagef("--addr %s: %v", o.addr, err)
		}
		// A port in use, no permission: the run cannot be carried out.
		return fmt.Errorf("serve: --addr %s: %w", o.addr, err)
	}
	listened := time.Now()
	epoch := o.epoch.t

	var file *os.File
	if o.record != "" {
		file, err = openRecording(o.record, o.force)
		if err != nil {
			ln.Close()
			if errors.Is(err, os.ErrExist) {
				return usagef("--output %s: the file exists; pass --force to overwrite it", o.record)
			}
			return badInput(fmt.Errorf("--output: %w", err))
		}
	}
	so := runner.ServeOptions{
		Server:              &cfg,
		Seed:                o.seed,
		Listened:            listened,
		StartOnFirstRequest: o.start == startFirstRequest,
		Epoch:               epoch,
		Duration:            o.duration,
		NoSource:            o.scenario == "", // the default server is no scenario file
		Tool:                version,
		Host:                hostname(),
		Metrics:             stubprom.Handler,
		NewLimiter:          newLimiter,
		Probe:               probeCommand(), // for clients on this host
		// Only the quota backend's failures reach Error, at most one line
		// a second; connection noise stays at Debug.
		Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if file != nil {
		so.Record = file
	}
	so.Notes = serveNotes(cfg, name, o, newLimiter != nil)
	ctl := &runner.ControlOptions{AllowRemote: o.allowRemote, Output: o.record}
	grpcStub := cfg.Protocol == stubserver.ProtocolGRPC
	if !o.noControl && !grpcStub {
		// The control API is HTTP: a gRPC stub's listener has none.
		so.Control = ctl
	}
	start := listened
	if !epoch.IsZero() {
		start = runner.AnchorEpoch(epoch)
	}
	status := newServeStatus(e, runner.ServeMeta(sc, start, so))
	so.OnAttempt = status.onAttempt
	ctl.Prepare = func(next *scenarios.Scenario) (stubserver.Config, []string, error) {
		return resetConfig(next, name, cfg.Upstream, o, newLimiter != nil)
	}
	if o.record != "" {
		ctl.Open = func(n int) (io.WriteCloser, string, error) {
			path := numberedPath(o.record, n)
			f, err := openRecording(path, o.force)
			if errors.Is(err, os.ErrExist) {
				err = fmt.Errorf("%s exists (serve --force overwrites it)", path)
			}
			return f, path, err
		}
	}
	ctl.OnReset = func(n int, next *scenarios.Scenario, stub *stubserver.Server, where string) {
		zero := time.Now()
		if t, ok := stub.Started(); ok {
			zero = t
		}
		status.reset(stub, runner.ServeMeta(next, zero, runner.ServeOptions{Seed: so.Seed, Tool: so.Tool}))
		if where == "" {
			where = "memory"
		}
		fmt.Fprintf(e.stdout, "retrylab: reset: recording %d of %q (to %s)\n", n, next.Name, where)
	}
	sv, err := runner.NewServe(sc, so)
	if err != nil {
		status.finish()
		ln.Close()
		closeFile(file)
		if file != nil && !o.force {
			os.Remove(o.record) // ours, and empty: do not make the next try need --force
		}
		return badInput(err)
	}
	start = sv.Start()

	base := "http://" + ln.Addr().String()
	if grpcStub {
		fmt.Fprintf(e.stdout, "retrylab: serving %q over gRPC on %s\n", name, ln.Addr())
		fmt.Fprintf(e.stdout, "  any method; metadata x-retrylab-path: /c/{client}/r/{seq} names a logical request (a retry repeats it); no control API, metrics or health over gRPC\n")
	} else {
		fmt.Fprintf(e.stdout, "retrylab: serving %q on %s\n", name, base)
		fmt.Fprintf(e.stdout, "  client URLs: %s/c/{client}/r/{seq}  (a retry repeats the same URL)\n", base)
		fmt.Fprintf(e.stdout, "  metrics: %s/metrics   health: %s/healthz\n", base, base)
	}
	if !o.noControl && !grpcStub {
		fmt.Fprintf(e.stdout, "  control API: %s%s (status, verdict, recording; POST reset)\n", base, runner.ControlPrefix)
	}
	if o.record != "" {
		fmt.Fprintf(e.stdout, "  recording to %s\n", o.record)
	}
	if o.start == startFirstRequest {
		fmt.Fprintf(e.stdout, "  phases start at the first request\n")
	}
	if newLimiter != nil {
		fmt.Fprintf(e.stdout, "  %s\n", backendNote(cfg, name, o.redisSet))
	}
	if cfg.Upstream != "" {
		fmt.Fprintf(e.stdout, "  %s\n", upstreamNote(cfg.Upstream, o.upstream != ""))
	}
	if !epoch.IsZero() {
		fmt.Fprintf(e.stdout, "  phases start at the epoch %s (%s)\n", o.epoch.String(), relative(time.Until(start)))
	}

	status.srv.Store(sv.Stub())
	st, serveErr := sv.Serve(ctx, ln)
	status.finish()
	if cerr := closeFile(file); serveErr == nil {
		serveErr = cerr
	}
	fmt.Fprintf(e.stdout, "retrylab: stopped after %v: %d requests (%d ok, %d 429, %d 503, %d other, %d faults)\n",
		time.Since(listened).Round(time.Millisecond), st.Attempts, st.OK, st.Throttled429, st.Unavailable503, st.Other, st.Faults)
	if serveErr != nil && !errors.Is(serveErr, net.ErrClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// openRecording creates the recording file at path, refusing an existing
// one unless force. It is opened for reading too: the control API reads
// the recording back from it.
func openRecording(path string, force bool) (*os.File, error) {
	flags := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL // created since the check: still refused
	}
	return os.OpenFile(path, flags, 0o644)
}

// numberedPath is where recording n (one per reset of the control API)
// of serve -o path goes: path itself for the first, else n before the
// extension (t.ndjson, t.2.ndjson, t.3.ndjson, ...).
func numberedPath(path string, n int) string {
	if n <= 1 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.%d%s", strings.TrimSuffix(path, ext), n, ext)
}

// serveNotes are the meta record's notes on where the quota lives and
// where serve forwards.
func serveNotes(cfg stubserver.Config, name string, o serveOptions, redis bool) []string {
	var notes []string
	if redis {
		notes = append(notes, backendNote(cfg, name, o.redisSet))
	}
	if cfg.Upstream != "" {
		notes = append(notes, upstreamNote(cfg.Upstream, o.upstream != ""))
	}
	return notes
}

// resetConfig is the stub's configuration for a reset to sc, with serve's
// --redis and --upstream, and the meta record's notes. serve started on
// scenario name, forwarding to upstream ("": nowhere); redis says its
// quota is in Redis, under name's keys. A reset cannot point serve at an
// upstream of its own: a peer of the control API must not make serve
// forward elsewhere.
func resetConfig(sc *scenarios.Scenario, name, upstream string, o serveOptions, redis bool) (stubserver.Config, []string, error) {
	cfg := sc.Server
	if u := cfg.Upstream; u != "" && o.upstream == "" && u != upstream {
		return cfg, nil, fmt.Errorf("scenario %q: server.upstream %s: a reset cannot point serve at an upstream it was not started with (serve --upstream, or its --scenario's)", sc.Name, redacted(u))
	}
	if o.redisSet {
		if cfg.Quota == nil {
			return cfg, nil, fmt.Errorf("scenario %q has no quota to keep in Redis (serve --redis)", sc.Name)
		}
		cfg = withBackend(cfg, o.redis)
	}
	if o.upstream != "" {
		cfg.Upstream = o.upstream
	}
	if q := cfg.Quota; q != nil {
		switch onRedis := isRedisURL(q.Backend); {
		case onRedis && !redis:
			return cfg, nil, fmt.Errorf("scenario %q keeps its quota in Redis (server.quota.backend): a reset cannot start a backend; start serve with it", sc.Name)
		case redis && (!onRedis || sc.Name != name):
			return cfg, nil, fmt.Errorf("scenario %q: serve keeps the quota in Redis under scenario %q's keys; a reset may serve only that scenario's quota", sc.Name, name)
		}
	}
	return cfg, serveNotes(cfg, sc.Name, o, redis && cfg.Quota != nil), nil
}

// backendNote says where serve keeps the quota: printed, and noted in the
// recording's meta record.
func backendNote(cfg stubserver.Config, name string, flag bool) string {
	from := "the scenario's backend"
	if flag {
		from = "--redis"
	}
	return fmt.Sprintf("quota in Redis %s (%s), keys under %s, on_error %s",
		redacted(cfg.Quota.Backend), from, servePrefix(name), onError(cfg.Quota))
}

// upstreamNote says where serve forwards: printed, and noted in the
// recording's meta record.
func upstreamNote(u string, flag bool) string {
	from := "server.upstream"
	if flag {
		from = "--upstream"
	}
	return fmt.Sprintf("proxying to %s (%s): ok phases, requests the quota admits and passthrough answers get its answers; a dead upstream gets 502, recorded upstream: failed", u, from)
}

// onError is a quota's OnError with its default spelled out.
func onError(q *stubserver.Quota) string {
	if q.OnError == "" {
		return stubserver.OnErrorClosed
	}
	return q.OnError
}

// loadServeScenario returns the scenario whose server serve runs: a
// scenario file, a built-in, or (arg "") the default server.
func loadServeScenario(arg string) (*scenarios.Scenario, error) {
	if arg == "" {
		cfg, err := scenarios.ParseServer("default-serve.yaml", defaultServe)
		if err != nil {
			return nil, err
		}
		return &scenarios.Scenario{Name: "default", Description: "every Retry-After form in turn, then a quota", Server: cfg}, nil
	}
	return scenarios.Resolve(arg)
}

// closeFile closes the recording's file (nil: none).
func closeFile(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close()
}

// checkPort refuses a listen address whose port is not a number in
// 0-65535 or a known service name: bad input, not a failed run.
func checkPort(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("%s %q: %v", flag, addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usagef("%s %q: %v", flag, addr, err)
	}
	return nil
}

// checkLoopback refuses a listen or target address outside loopback unless
// allowed: a load tool must not become the outage.
func checkLoopback(flag, addr string, allow bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("%s %q: %v", flag, addr, err)
	}
	if allow || loopbackHost(host) {
		return nil
	}
	return usagef("%s %s is not a loopback address; pass --allow-remote to use it", flag, addr)
}
