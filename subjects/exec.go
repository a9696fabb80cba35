package subjects

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultProgramTimeout bounds a Program run whose Timeout is zero.
const DefaultProgramTimeout = 5 * time.Minute

// ErrProgram is returned by the Caller of a Program: an exec subject runs
// whole simulated clients with Run, not one request at a time.
var ErrProgram = errors.New("subjects: exec runs whole clients through Program.Run, not per request")

// ErrProgramOutput is wrapped by Run's error when the program printed a
// line outside the protocol; ParseProgramLine's errors wrap it too.
var ErrProgramOutput = errors.New("subjects: bad program output")

// Program is the exec subject: an external program, in any language, that
// plays one simulated client per run. Its environment holds
//
//	RETRYLAB_BASE_URL  the client's base URL, ending in /c/{client}
//	RETRYLAB_CLIENT    the client id
//	RETRYLAB_REQUESTS  the number of logical requests N
//	RETRYLAB_API_KEY   the client's API key, when the scenario gives it
//	                   one (fleet.api_keys): send it as Authorization: Bearer
//
// and it must request $RETRYLAB_BASE_URL/r/0 … /r/N-1 (retrying as its
// library does), print one line per logical request on stdout, "ok PATH"
// or "fail PATH REASON" (PATH: r/N, /r/N, /c/{client}/r/N or the request's
// URL; see ParseProgramLine), and exit with status 0. The server's
// timeline records its attempts.
// It may first print ReadyLine ("ready") once it can send; the runner
// opens the scenario when every process is ready (see RunReady).
// With fleet.processes a process plays several clients instead (see
// RunClients): it is told which by RETRYLAB_CLIENTS and
// RETRYLAB_BASE_URL_PREFIX, and its result lines name their client.
//
// A Program runs in real time only: it talks to the stub over real TCP, so
// a virtual-time run refuses it (see CheckVirtual). The zero Program has
// no Path and fails to run. A Program is a value, safe for concurrent use.
type Program struct {
	Path string   // the program, looked up in PATH if it has no slash
	Args []string // its arguments
	Dir  string   // working directory ("": the current one)
	Env  []string // added to the inherited environment, "KEY=value"
	// Timeout bounds each run: past it the process, and on Unix its whole
	// process group, is killed (zero: DefaultProgramTimeout). The context
	// given to Run bounds it too.
	Timeout time.Duration
}

// Name returns "exec".
func (Program) Name() string { return "exec" }

// RealTimeOnly says why a Program cannot run in virtual time.
func (Program) RealTimeOnly() string { return "runs a real process over real TCP" }

// Describe reports the program's command line and, as its stated policy,
// the one its run was given (Params.Policy: the scenario's subject.policy
// or run --policy): a program's retry logic cannot be read from outside,
// so what the user states about it is what attempts, amplification,
// budget, jitter-bounds and instant-retry judge it against. A policy that
// states none of base, cap, max_attempts, budget and jitter is no stated
// policy (Stated nil). Jitter defaults to full when a base is stated, as
// for every subject built on a policy.
func (p Program) Describe(params Params) Info {
	info := Info{Summary: "exec: " + strings.Join(append([]string{p.Path}, p.Args...), " ")}
	pol := params.Policy
	if pol.Base == 0 && pol.Cap == 0 && pol.MaxAttempts == 0 && pol.Budget == 0 && pol.Jitter == "" {
		info.Summary += "; no stated policy"
		return info
	}
	jitter := pol.Jitter
	if jitter == "" && pol.Base > 0 {
		jitter = "full"
	}
	info.Stated = &Stated{Base: pol.Base, Cap: pol.Cap, MaxAttempts: pol.MaxAttempts, Budget: pol.Budget, Jitter: jitter}
	info.Summary += "; stated policy " + info.Stated.String()
	return info
}

// New returns a Caller that fails with ErrProgram (or ErrRealTimeOnly in
// virtual mode): use Run.
func (p Program) New(next http.RoundTripper, params Params) Caller {
	err := ErrProgram
	if params.Virtual {
		err = fmt.Errorf("%w: exec %s", ErrRealTimeOnly, p.RealTimeOnly())
	}
	return func(context.Context, *http.Request) (*http.Response, error) { return nil, err }
}

// ProgramLine is one result line of a program's output.
type ProgramLine struct {
	OK     bool
	Path   string // as printed: r/N, /r/N, /c/{client}/r/N or the request's URL
	Reason string // for a failure, the rest of the line (may be empty)
	// Read is when Run's reader read the line off the program's stdout
	// (the read that completed it, with a monotonic reading): the latest
	// instant the logical request can have ended, as the harness sees it.
	// Zero from ParseProgramLine.
	Read time.Time
}

// WantLine says what a result line must look like; the errors of
// ParseProgramLine and of a Program run end with it.
const WantLine = `want "ok PATH" or "fail PATH REASON", where PATH is /r/N, r/N or the request's URL`

// Seq returns the logical request number of the line's path (the N of a
// path that is "r/N" or ends in "/r/N", any query or fragment ignored),
// or -1 when it has none. N is decimal, without a leading zero (but "0"),
// below a billion.
func (l ProgramLine) Seq() int {
	n, _ := pathRequest(l.Path)
	return n
}

// Client returns the client a line's path names (the K of a "/c/K/r/N"
// path or URL), or -1 when it names none.
func (l ProgramLine) Client() int {
	_, k := pathRequest(l.Path)
	return k
}

// pathRequest parses a result line's path: the request number N of "r/N"
// or ".../r/N" and the client K of ".../c/K/r/N" (-1 when absent).
func pathRequest(p string) (seq, client int) {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	var s string
	switch i := strings.LastIndex(p, "/r/"); {
	case i >= 0:
		s, p = p[i+3:], p[:i]
	case strings.HasPrefix(p, "r/"):
		s, p = p[2:], ""
	default:
		return -1, -1
	}
	seq = decimal(s)
	if seq < 0 {
		return -1, -1
	}
	client = -1
	if i := strings.LastIndex(p, "/c/"); i >= 0 {
		client = decimal(p[i+3:])
	}
	return seq, client
}

// decimal parses a canonical decimal below a billion, or returns -1.
func decimal(s string) int {
	if !isDigits(s) || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	n, _ := strconv.Atoi(s)
	return n
}

// Result maps the line to an outcome result: "ok" for ok; for fail, the
// reason's first word when it is one of "gave-up", "budget",
// "non-retryable" or "error", else "error".
func (l ProgramLine) Result() string {
	if l.OK {
		return ResultOK
	}
	word, _, _ := strings.Cut(l.Reason, " ")
	switch word {
	case ResultGaveUp, ResultBudget, ResultNonRetryable, ResultError:
		return word
	}
	return ResultError
}

// LineError is a line of a program's stdout outside the protocol. It
// unwraps to ErrProgramOutput. Its text is
//
//	line 2: "okay /r/0": want "ok PATH" or "fail PATH REASON", where PATH is /r/N, r/N or the request's URL
//
// ("line N: " only when the line number is known).
type LineError struct {
	Line    int    // 1-based line number on stdout, 0 when unknown
	Text    string // the line, clipped to 80 bytes, without its "\r"
	Problem string // what is wrong, and what was wanted
}

func (e *LineError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %q: %s", e.Line, e.Text, e.Problem)
	}
	return fmt.Sprintf("%q: %s", e.Text, e.Problem)
}

// Unwrap returns ErrProgramOutput.
func (e *LineError) Unwrap() error { return ErrProgramOutput }

// ParseProgramLine parses one output line (without its newline; a
// trailing "\r" is ignored): "ok PATH" or "fail PATH [REASON...]", fields
// separated by spaces or tabs, where PATH names the request: r/N, /r/N,
// /c/{client}/r/N or the request's URL ($RETRYLAB_BASE_URL/r/N); a query
// or fragment is ignored. Errors are *LineError (they wrap
// ErrProgramOutput).
func ParseProgramLine(s string) (ProgramLine, error) {
	s = strings.TrimSuffix(s, "\r")
	bad := func(problem string) (ProgramLine, error) {
		return ProgramLine{}, &LineError{Text: clip(s), Problem: problem}
	}
	verb, rest := cutSpace(s)
	path, reason := cutSpace(rest)
	var l ProgramLine
	switch verb {
	case "ok":
		if reason != "" {
			return bad(`nothing may follow the path of an ok line: want "ok PATH"`)
		}
		l.OK = true
	case "fail":
		l.Reason = reason
	default:
		return bad(WantLine)
	}
	if path == "" {
		return bad("no PATH: " + WantLine)
	}
	for _, r := range path {
		if r < 0x21 || r == 0x7f {
			return bad("control character in PATH: " + WantLine)
		}
	}
	if seq, _ := pathRequest(path); seq < 0 {
		return bad("PATH names no request: " + WantLine)
	}
	l.Path = path
	return l, nil
}

// cutSpace splits s at its first run of spaces or tabs, after trimming
// leading ones.
func cutSpace(s string) (head, tail string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimRight(strings.TrimLeft(s[i:], " \t"), " \t")
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// maxLine bounds one output line; longer lines are a protocol error.
const maxLine = 64 << 10

// ReadyLine is the line a program may print on stdout, before its result
// lines, once it is ready to send (its runtime loaded, its client built).
// An exec fleet opens the scenario only when every program is ready: it
// printed this line, sent its first request, exited, or a bounded wait
// passed. Programs that never print it keep working.
const ReadyLine = "ready"

// ProgramError is the error of a Program run that did not go by the
// protocol: each field that is set is one thing that went wrong. Run
// returns it (as error) together with the lines it could parse.
type ProgramError struct {
	Path string // the program
	// Start is why the program could not be started (nothing else is set).
	Start error
	// Output is the first line outside the protocol, a *LineError (it
	// wraps ErrProgramOutput and names the line): malformed, a request
	// out of range or of another client, a second line for a request, or
	// a "ready" line after a result. BadLine is that line, clipped.
	Output  error
	BadLine string
	// Read is a failure reading the program's stdout (a line longer than
	// 64 KiB among them); the program is then killed (Killed is set).
	Read error
	// ExitCode is the program's non-zero exit status (-1: killed by a
	// signal), 0 when it exited cleanly.
	ExitCode int
	// Killed is non-nil when the program was killed at its deadline or
	// because ctx ended: the cause.
	Killed error
	// Wait is the error exec.Cmd.Wait returned, Stderr the last 1 KiB of
	// the program's stderr.
	Wait   error
	Stderr string
}

func (e *ProgramError) Error() string {
	var parts []string
	if e.Start != nil {
		parts = append(parts, fmt.Sprintf("subjects: exec %s: could not start: %v", e.Path, e.Start))
	}
	if e.Output != nil {
		parts = append(parts, fmt.Sprintf("subjects: exec %s: stdout %v", e.Path, e.Output))
	}
	if e.Read != nil {
		parts = append(parts, fmt.Sprintf("subjects: exec %s: reading stdout: %v", e.Path, e.Read))
	}
	if e.Wait != nil {
		msg := fmt.Sprintf("subjects: exec %s: %v", e.Path, e.Wait)
		if e.Killed != nil {
			msg = fmt.Sprintf("subjects: exec %s: killed: %v", e.Path, e.Killed)
		}
		if tail := strings.TrimSpace(e.Stderr); tail != "" {
			msg += "; stderr: " + tail
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the errors behind e (ErrProgramOutput among them when the
// program broke the line protocol).
func (e *ProgramError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Start, e.Output, e.Read, e.Wait} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Run runs the program as client number client of a run whose client base
// URL is baseURL (ending in /c/{client}), for requests logical requests.
// env is added to the environment after p.Env. It returns the lines parsed,
// in order, even when it also returns an error, a *ProgramError: the
// process could not start, failed (non-zero exit, killed at the deadline or
// when ctx ended) or printed a line outside the protocol (the error wraps
// ErrProgramOutput and names the line): a malformed line, a path naming a
// request at or past requests or another client than client, a second line
// for a request. Only the protocol's lines are kept, one per request. The
// last 1 KiB of the program's stderr is quoted in a process error.
func (p Program) Run(ctx context.Context, baseURL string, client, requests int, env []string) ([]ProgramLine, error) {
	return p.RunReady(ctx, baseURL, client, requests, env, nil)
}

// RunReady is Run that also calls ready (when not nil), at most once and
// from Run's goroutine, when the program prints ReadyLine before any
// result line. A ReadyLine after a result line is a protocol error.
func (p Program) RunReady(ctx context.Context, baseURL string, client, requests int, env []string, ready func()) ([]ProgramLine, error) {
	env = append(env[:len(env):len(env)],
		"RETRYLAB_BASE_URL="+strings.TrimSuffix(baseURL, "/"),
		"RETRYLAB_CLIENT="+strconv.Itoa(client),
		"RETRYLAB_REQUESTS="+strconv.Itoa(requests),
	)
	check := func(seq, k int) string {
		switch {
		case seq >= requests:
			return fmt.Sprintf("no such request: this client has %s", requestRange(requests))
		case k >= 0 && k != client:
			return fmt.Sprintf("PATH names client %d; this program is client %d", k, client)
		}
		return ""
	}
	return p.run(ctx, env, ready, check, false)
}

// MaxClientsEnv bounds the value of RETRYLAB_CLIENTS and of
// RETRYLAB_API_KEYS (Linux refuses to start a program with one
// environment string over 128 KiB): RunClients refuses to start a process
// whose lists are longer.
const MaxClientsEnv = 120 << 10

// RunClients runs the program as several clients of one run at once (a
// fleet with fleet.processes): clients, in increasing order, are the
// clients it plays, urlPrefix the base URL of every client without its id
// (ending in /c/), and each client has requests logical requests. Its
// environment holds
//
//	RETRYLAB_CLIENTS          the clients, comma-separated, runs of
//	                          consecutive ids as ranges: "0-3,8,12"
//	RETRYLAB_BASE_URL_PREFIX  urlPrefix: client K's base URL is the prefix
//	                          followed by K ("http://127.0.0.1:41234/c/17")
//	RETRYLAB_REQUESTS         the number of logical requests per client
//
// (RETRYLAB_BASE_URL and RETRYLAB_CLIENT are not set: a program written
// for one client fails at once instead of playing the wrong one), env
// after p.Env. Each result line must name its client: its PATH is
// /c/{client}/r/N or the request's URL; a bare r/N or /r/N, a client the
// process does not play, a request at or past requests or a second line
// for a request is a protocol error. Otherwise it is Run: the same
// ReadyLine, errors and lines (a line's Client says whose it is).
func (p Program) RunClients(ctx context.Context, urlPrefix string, clients []int, requests int, env []string, ready func()) ([]ProgramLine, error) {
	list := FormatClients(clients)
	if len(list) > MaxClientsEnv {
		return nil, &ProgramError{Path: p.Path, Start: fmt.Errorf("RETRYLAB_CLIENTS would be %d KiB for %d clients, over the %d KiB an environment variable may safely hold: run more processes (fleet.processes)", len(list)>>10, len(clients), MaxClientsEnv>>10)}
	}
	for _, kv := range env {
		if len(kv) > MaxClientsEnv {
			name, _, _ := strings.Cut(kv, "=")
			return nil, &ProgramError{Path: p.Path, Start: fmt.Errorf("%s would be %d KiB for %d clients, over the %d KiB an environment variable may safely hold: run more processes (fleet.processes)", name, len(kv)>>10, len(clients), MaxClientsEnv>>10)}
		}
	}
	if !strings.HasSuffix(urlPrefix, "/") {
		urlPrefix += "/"
	}
	env = append(env[:len(env):len(env)],
		"RETRYLAB_CLIENTS="+list,
		"RETRYLAB_BASE_URL_PREFIX="+urlPrefix,
		"RETRYLAB_REQUESTS="+strconv.Itoa(requests),
	)
	plays := make(map[int]bool, len(clients))
	for _, k := range clients {
		plays[k] = true
	}
	check := func(seq, k int) string {
		switch {
		case k < 0:
			return "PATH names no client: this process plays several clients (RETRYLAB_CLIENTS), so a result line must name one: /c/{client}/r/N or the request's URL"
		case !plays[k]:
			return fmt.Sprintf("PATH names client %d, which this process does not play (RETRYLAB_CLIENTS=%s)", k, clip(list))
		case seq >= requests:
			return fmt.Sprintf("no such request: each client has %s", requestRange(requests))
		}
		return ""
	}
	return p.run(ctx, env, ready, check, true)
}

// FormatClients writes client ids, in increasing order, as RETRYLAB_CLIENTS
// does: comma-separated, a run of three or more consecutive ids as the
// inclusive range "A-B".
func FormatClients(ids []int) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ids[i]))
		switch {
		case j-i >= 2:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ids[j]))
		case j > i:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return b.String()
}

// ParseClients parses a RETRYLAB_CLIENTS value (what a program in Go
// would do): comma-separated decimal ids and inclusive ranges "A-B", in
// increasing order without repeats; at most max ids. Errors name the
// position (1-based byte column) of the bad item.
func ParseClients(s string, max int) ([]int, error) {
	var ids []int
	col := 1
	for item := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, b := decimal(lo), decimal(hi)
		if !isRange {
			b = a
		}
		switch {
		case a < 0 || b < 0:
			return nil, fmt.Errorf("RETRYLAB_CLIENTS col %d: %q: want a client id or a range A-B (decimal, no leading zero)", col, clip(item))
		case b < a:
			return nil, fmt.Errorf("RETRYLAB_CLIENTS col %d: %q: a range must not run backwards", col, clip(item))
		case len(ids) > 0 && a <= ids[len(ids)-1]:
			return nil, fmt.Errorf("RETRYLAB_CLIENTS col %d: %q: ids must increase", col, clip(item))
		case len(ids)+(b-a+1) > max:
			return nil, fmt.Errorf("RETRYLAB_CLIENTS col %d: %q: more than %d clients", col, clip(item), max)
		}
		for k := a; k <= b; k++ {
			ids = append(ids, k)
		}
		col += len(item) + 1
	}
	return ids, nil
}

// run starts the program with env added and reads its result lines:
// check says what is wrong with a line naming request seq of client k
// (-1: none named), "" for nothing; multi says the program plays several
// clients (a request is then its client's and its number, else its number).
func (p Program) run(ctx context.Context, env []string, ready func(), check func(seq, k int) string, multi bool) ([]ProgramLine, error) {
	if p.Path == "" {
		return nil, &ProgramError{Start: errors.New("no program to run")}
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProgramTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Path, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Env = append(cmd.Env, env...)
	ownProcessGroup(cmd)
	cmd.WaitDelay = time.Second // children that escaped the kill may hold the pipes open
	stderr := &tailBuffer{max: 1 << 10}
	cmd.Stderr = stderr
	perr := &ProgramError{Path: p.Path}
	out, err := cmd.StdoutPipe()
	if err != nil {
		perr.Start = err
		return nil, perr
	}
	if err := cmd.Start(); err != nil {
		perr.Start = err
		return nil, perr
	}

	var lines []ProgramLine
	type request struct{ seq, client int }
	first := make(map[request]int) // request → line number of its result
	fault := func(n int, text, problem string) {
		if perr.Output == nil {
			perr.Output = &LineError{Line: n, Text: clip(strings.TrimSuffix(text, "\r")), Problem: problem}
			perr.BadLine = perr.Output.(*LineError).Text
		}
	}
	stdout := &stampedReader{r: out}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		read := stdout.at // the read that completed this line
		text := sc.Text()
		if strings.TrimSpace(text) == ReadyLine {
			if len(lines) == 0 && perr.Output == nil {
				if ready != nil {
					ready()
					ready = nil
				}
				continue
			}
			fault(n, text, `"ready" after a result line: print it once, before the first result line`)
			continue
		}
		l, err := ParseProgramLine(text)
		if err != nil {
			var le *LineError
			if errors.As(err, &le) && perr.Output == nil {
				le.Line = n
				perr.Output, perr.BadLine = le, le.Text
			}
			continue
		}
		seq, k := l.Seq(), l.Client()
		if problem := check(seq, k); problem != "" {
			fault(n, text, problem)
			continue
		}
		key, name := request{seq, k}, fmt.Sprintf("/c/%d/r/%d", k, seq)
		if !multi { // one client: r/N and /c/K/r/N are the same request
			key.client, name = 0, fmt.Sprintf("/r/%d", seq)
		}
		if prev, dup := first[key]; dup {
			fault(n, text, fmt.Sprintf("a second result line for %s (the first was line %d): want one per request", name, prev))
			continue
		}
		first[key] = n
		l.Read = read
		lines = append(lines, l)
	}
	switch err := sc.Err(); {
	case err == nil:
	case errors.Is(err, os.ErrClosed) && ctx.Err() != nil:
		// Killed at the deadline or by ctx, the program's pipe was closed
		// under the reader (exec's WaitDelay) before it read the end of
		// it: a slow reader on a loaded host, not a read failure; Killed
		// says what happened.
	default:
		perr.Read = err
		if errors.Is(err, bufio.ErrTooLong) {
			perr.Read = fmt.Errorf("line %d is longer than %d KiB: %w", n+1, maxLine>>10, err)
		}
		cancel() // stop the program: its output can no longer be read
	}
	if err := cmd.Wait(); err != nil {
		perr.Wait = err
		perr.Stderr = stderr.String()
		if ctx.Err() != nil {
			perr.Killed = context.Cause(ctx)
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			perr.ExitCode = ee.ExitCode()
		}
	}
	if perr.Output == nil && perr.Read == nil && perr.Wait == nil {
		return lines, nil
	}
	return lines, perr
}

// requestRange names a client's requests: "/r/0 … /r/N-1".
func requestRange(requests int) string {
	switch requests {
	case 0:
		return "no requests"
	case 1:
		return "one request, /r/0"
	}
	return fmt.Sprintf("%d requests, /r/0 … /r/%d", requests, requests-1)
}

// stampedReader notes when each Read of r returned data. A Scanner reads
// again only when it holds no whole line, so when it returns a line, the
// latest Read is the one that completed it: at is that line's read. One
// clock reading per read, not per line: a program's lines that arrive
// together are read together.
type stampedReader struct {
	r  io.Reader
	at time.Time
}

func (s *stampedReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.at = time.Now()
	}
	return n, err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, []byte("?")))
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
