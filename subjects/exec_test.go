package subjects

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"
)

func TestParseProgramLine(t *testing.T) {
	tests := []struct {
		in      string
		want    ProgramLine
		wantErr bool
	}{
		{"ok /c/1/r/0", ProgramLine{OK: true, Path: "/c/1/r/0"}, false},
		{"ok /c/1/r/0\r", ProgramLine{OK: true, Path: "/c/1/r/0"}, false},
		{"  ok\t/c/1/r/0  ", ProgramLine{OK: true, Path: "/c/1/r/0"}, false},
		{"fail /c/1/r/2 gave-up after 5 attempts", ProgramLine{Path: "/c/1/r/2", Reason: "gave-up after 5 attempts"}, false},
		{"fail /c/1/r/2", ProgramLine{Path: "/c/1/r/2"}, false},
		{"fail http://127.0.0.1:8080/c/1/r/2 status 503", ProgramLine{Path: "http://127.0.0.1:8080/c/1/r/2", Reason: "status 503"}, false},
		{"ok /c/1/r/0 extra", ProgramLine{}, true},
		{"ok", ProgramLine{}, true},
		{"fail", ProgramLine{}, true},
		{"OK /c/1/r/0", ProgramLine{}, true},
		{"", ProgramLine{}, true},
		{"done /c/1/r/0", ProgramLine{}, true},
		{"ok /c/1/r/\x01", ProgramLine{}, true},
		// Every form of PATH: r/N, /r/N, /c/K/r/N, the request's URL.
		{"ok r/0", ProgramLine{OK: true, Path: "r/0"}, false},
		{"ok /r/0", ProgramLine{OK: true, Path: "/r/0"}, false},
		{"ok http://127.0.0.1:41234/c/3/r/0", ProgramLine{OK: true, Path: "http://127.0.0.1:41234/c/3/r/0"}, false},
		{"fail r/12 gave-up", ProgramLine{Path: "r/12", Reason: "gave-up"}, false},
		// A PATH that names no request.
		{"ok foo", ProgramLine{}, true},
		{"ok /r/", ProgramLine{}, true},
		{"ok /r/x", ProgramLine{}, true},
		{"ok /r/01", ProgramLine{}, true},
		{"ok /r/0/", ProgramLine{}, true},
		{"fail xr/0 error", ProgramLine{}, true},
	}
	for _, tt := range tests {
		got, err := ParseProgramLine(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseProgramLine(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrProgramOutput) {
			t.Errorf("ParseProgramLine(%q) error %v does not wrap ErrProgramOutput", tt.in, err)
		}
	}
}

func TestProgramLineSeqResult(t *testing.T) {
	tests := []struct {
		line   ProgramLine
		seq    int
		result string
	}{
		{ProgramLine{OK: true, Path: "/c/1/r/17"}, 17, "ok"},
		{ProgramLine{OK: true, Path: "http://h:1/c/1/r/3?x=1"}, 3, "ok"},
		{ProgramLine{Path: "/c/1/r/x", Reason: "budget exhausted"}, -1, "budget"},
		{ProgramLine{Path: "/c/1/q/2", Reason: "non-retryable 404"}, -1, "non-retryable"},
		{ProgramLine{Path: "/r/2", Reason: "timeout"}, 2, "error"},
		{ProgramLine{Path: "/r/99999999999", Reason: ""}, -1, "error"},
		{ProgramLine{OK: true, Path: "r/4"}, 4, "ok"},
		{ProgramLine{OK: true, Path: "r/4#x"}, 4, "ok"},
	}
	for _, tt := range tests {
		if got := tt.line.Seq(); got != tt.seq {
			t.Errorf("%+v.Seq() = %d; want %d", tt.line, got, tt.seq)
		}
		if got := tt.line.Result(); got != tt.result {
			t.Errorf("%+v.Result() = %q; want %q", tt.line, got, tt.result)
		}
	}
}

// The error of a malformed line says what was wanted.
func TestParseProgramLineWording(t *testing.T) {
	tests := []struct{ in, want string }{
		{"okay /r/0", `"okay /r/0": want "ok PATH" or "fail PATH REASON", where PATH is /r/N, r/N or the request's URL`},
		{"ok", `"ok": no PATH: want "ok PATH" or "fail PATH REASON", where PATH is /r/N, r/N or the request's URL`},
		{"ok /r/0 fine", `"ok /r/0 fine": nothing may follow the path of an ok line: want "ok PATH"`},
		{"ok /x/0", `"ok /x/0": PATH names no request: want "ok PATH" or "fail PATH REASON", where PATH is /r/N, r/N or the request's URL`},
	}
	for _, tt := range tests {
		_, err := ParseProgramLine(tt.in)
		var le *LineError
		if !errors.As(err, &le) || err.Error() != tt.want {
			t.Errorf("ParseProgramLine(%q) error = %v; want a *LineError %s", tt.in, err, tt.want)
		}
	}
	le := &LineError{Line: 2, Text: "okay /r/0", Problem: WantLine}
	if got, want := le.Error(), `line 2: "okay /r/0": want "ok PATH" or "fail PATH REASON", where PATH is /r/N, r/N or the request's URL`; got != want {
		t.Errorf("LineError = %s; want %s", got, want)
	}
}

// Run rejects result lines that name a request the client does not have,
// another client's request, or a request already reported, and lines
// longer than 64 KiB; each error names the line and what was wanted.
func TestProgramRunLineFaults(t *testing.T) {
	needSh(t)
	tests := []struct {
		name, script string
		lines        int
		want         string
	}{
		{"out of range", `echo "ok r/0"; echo "ok r/2"`, 1,
			`stdout line 2: "ok r/2": no such request: this client has 2 requests, /r/0 … /r/1`},
		{"another client", `echo "ok /c/2/r/0"`, 0,
			`stdout line 1: "ok /c/2/r/0": PATH names client 2; this program is client 1`},
		{"another client's URL", `echo "ok http://127.0.0.1:9/c/10/r/1"`, 0, "PATH names client 10; this program is client 1"},
		{"duplicate", `echo "ok r/0"; echo "fail $RETRYLAB_BASE_URL/r/0 error"`, 1,
			`stdout line 2: "fail http://127.0.0.1:9/c/1/r/0 error": a second result line for /r/0 (the first was line 1): want one per request`},
		{"ready after a result", `echo "ok /r/0"; echo ready`, 1,
			`stdout line 2: "ready": "ready" after a result line: print it once, before the first result line`},
		{"too long", `echo "ok /r/0"; head -c 70000 /dev/zero | tr '\0' x; echo`, 1,
			"reading stdout: line 2 is longer than 64 KiB"},
	}
	for _, tt := range tests {
		p := Program{Path: "sh", Args: []string{"-c", tt.script}}
		lines, err := p.Run(context.Background(), "http://127.0.0.1:9/c/1", 1, 2, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Run error = %v; want one containing %s", tt.name, err, tt.want)
		}
		if len(lines) != tt.lines {
			t.Errorf("%s: Run kept %d lines; want %d", tt.name, len(lines), tt.lines)
		}
	}
}

func FuzzParseProgramLine(f *testing.F) {
	for _, s := range []string{"ok /c/1/r/0", "fail /c/1/r/2 gave-up after 5", "fail /r/1", "ok", "", " \t", "ok /a b", "fail\t/x\t\ty\r",
		"ok r/0", "ok http://127.0.0.1:80/c/3/r/9?a=1", "okay /r/0", "ok /r/01", "fail r/0 budget"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseProgramLine(s)
		if err != nil {
			if le := (*LineError)(nil); !errors.As(err, &le) || !strings.Contains(le.Problem, "want") {
				t.Fatalf("ParseProgramLine(%q) error %v: want a *LineError that says what was wanted", s, err)
			}
			if !errors.Is(err, ErrProgramOutput) {
				t.Fatalf("ParseProgramLine(%q) error %v does not wrap ErrProgramOutput", s, err)
			}
			return
		}
		if l.Path == "" || strings.ContainsAny(l.Path, " \t\r\n") {
			t.Fatalf("ParseProgramLine(%q).Path = %q; want non-empty, no spaces", s, l.Path)
		}
		if l.OK && l.Reason != "" {
			t.Fatalf("ParseProgramLine(%q) = ok with reason %q", s, l.Reason)
		}
		// Printing the line back and parsing it again gives the same line.
		out := "ok " + l.Path
		if !l.OK {
			out = "fail " + l.Path
			if l.Reason != "" {
				out += " " + l.Reason
			}
		}
		again, err := ParseProgramLine(out)
		if err != nil || again != l {
			t.Fatalf("round trip of %q via %q = %+v, %v; want %+v", s, out, again, err, l)
		}
		// A parsed line always names a request.
		if seq := l.Seq(); seq < 0 {
			t.Fatalf("ParseProgramLine(%q) = %+v with Seq() = %d; want a request number", s, l, seq)
		}
		if k := l.Client(); k < -1 {
			t.Fatalf("Client() = %d", k)
		}
		_ = utf8.ValidString(l.Reason)
		switch l.Result() {
		case ResultOK, ResultGaveUp, ResultBudget, ResultNonRetryable, ResultError:
		default:
			t.Fatalf("Result() = %q", l.Result())
		}
	})
}

func needSh(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
}

func TestProgramRun(t *testing.T) {
	needSh(t)
	script := `i=0; while [ $i -lt $RETRYLAB_REQUESTS ]; do
  if [ $i = 1 ]; then echo "fail $RETRYLAB_BASE_URL/r/$i budget spent"; else echo "ok $RETRYLAB_BASE_URL/r/$i"; fi
  i=$((i+1)); done; echo "client=$RETRYLAB_CLIENT extra=$EXTRA" >&2`
	p := Program{Path: "sh", Args: []string{"-c", script}, Env: []string{"EXTRA=1"}}
	before := time.Now()
	lines, err := p.Run(context.Background(), "http://127.0.0.1:9/c/7/", 7, 3, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines = readStamps(t, lines, before, time.Now())
	want := []ProgramLine{
		{OK: true, Path: "http://127.0.0.1:9/c/7/r/0"},
		{Path: "http://127.0.0.1:9/c/7/r/1", Reason: "budget spent"},
		{OK: true, Path: "http://127.0.0.1:9/c/7/r/2"},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("Run lines = %+v; want %+v", lines, want)
	}
}

// readStamps checks that every line was stamped when it was read, in
// order, within [before, after], and returns the lines without the stamps.
func readStamps(t *testing.T, lines []ProgramLine, before, after time.Time) []ProgramLine {
	t.Helper()
	out := make([]ProgramLine, len(lines))
	prev := before
	for i, l := range lines {
		if l.Read.Before(prev) || l.Read.After(after) {
			t.Errorf("line %d (%s) read at %v; want in order, within the run [%v, %v]", i, l.Path, l.Read, before, after)
		}
		prev = l.Read
		l.Read = time.Time{}
		out[i] = l
	}
	return out
}

func TestProgramRunErrors(t *testing.T) {
	needSh(t)
	tests := []struct {
		name, script string
		timeout      time.Duration
		lines        int
		wantErr      string
	}{
		{"bad line", `echo "ok $RETRYLAB_BASE_URL/r/0"; echo "hello"; echo "ok /r/1"`, 0, 2, "stdout line 2"},
		{"too many lines", `for i in 0 1 2 3; do echo "ok /r/$i"; done`, 0, 2, "no such request: this client has 2 requests"},
		{"exit status", `echo "ok /r/0"; echo boom >&2; exit 3`, 0, 1, "exit status 3; stderr: boom"},
		{"killed at the deadline", `echo "ok /r/0"; exec sleep 30`, 200 * time.Millisecond, 1, "killed"},
	}
	for _, tt := range tests {
		p := Program{Path: "sh", Args: []string{"-c", tt.script}, Timeout: tt.timeout}
		start := time.Now()
		lines, err := p.Run(context.Background(), "http://127.0.0.1:9/c/1", 1, 2, nil)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: Run error = %v; want one containing %q", tt.name, err, tt.wantErr)
		}
		if len(lines) != tt.lines {
			t.Errorf("%s: Run kept %d lines; want %d", tt.name, len(lines), tt.lines)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s: Run took %v; the deadline did not stop it", tt.name, time.Since(start))
		}
	}
	if _, err := (Program{}).Run(context.Background(), "", 0, 1, nil); err == nil {
		t.Error("zero Program Run = nil error; want one")
	}
}

func TestProgramVirtual(t *testing.T) {
	s, err := Lookup("exec:./client.py --fast")
	if err != nil {
		t.Fatalf("Lookup(exec:...): %v", err)
	}
	if p := s.(Program); p.Path != "./client.py" || !reflect.DeepEqual(p.Args, []string{"--fast"}) {
		t.Errorf("Lookup(exec:./client.py --fast) = %+v", p)
	}
	if err := CheckVirtual(s); !errors.Is(err, ErrRealTimeOnly) {
		t.Errorf("CheckVirtual(exec) = %v; want ErrRealTimeOnly", err)
	}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	if _, err := s.New(nil, Params{Virtual: true})(context.Background(), req); !errors.Is(err, ErrRealTimeOnly) {
		t.Errorf("exec Caller in virtual mode = %v; want ErrRealTimeOnly", err)
	}
	if _, err := s.New(nil, Params{})(context.Background(), req); !errors.Is(err, ErrProgram) {
		t.Errorf("exec Caller = %v; want ErrProgram", err)
	}
	for _, name := range Names() {
		s, _ := Lookup(name)
		if err := CheckVirtual(s); err != nil {
			t.Errorf("CheckVirtual(%s) = %v; want nil", name, err)
		}
	}
	if _, err := Lookup("exec:"); err == nil {
		t.Error("Lookup(exec:) = nil error; want one")
	}
	if _, err := Lookup("nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Lookup(nope) = %v; want ErrUnknown", err)
	}
}

// TestProgramKillsChildren: at the deadline the program's children die
// with it, not only the shell.
func TestProgramKillsChildren(t *testing.T) {
	needSh(t)
	pidFile := t.TempDir() + "/pid"
	p := Program{Path: "sh", Args: []string{"-c", `sleep 30 & echo $! > "$PIDFILE"; echo "ok /r/0"; wait`},
		Env: []string{"PIDFILE=" + pidFile}, Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, err := p.Run(context.Background(), "http://127.0.0.1:9/c/1", 1, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Run = %v; want killed", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v; want about the 300ms deadline", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	pid := strings.TrimSpace(string(b))
	// Wait (bounded) for the kernel to finish the child: gone, or a zombie.
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return // gone or dead
		}
		if _, err := os.Stat("/proc"); err != nil {
			t.Skip("no /proc")
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %s still alive after the program was killed: %s", pid, stat)
		}
		time.Sleep(10 * time.Millisecond) // a real child process, no synctest bubble: a bounded poll
	}
}

// RunReady reports the ready line once, before the results, and keeps it
// out of the lines; a ready line after a result is a protocol error.
func TestProgramRunReady(t *testing.T) {
	needSh(t)
	p := Program{Path: "sh", Args: []string{"-c", `echo ready; echo ready; echo "ok /r/0"`}}
	calls := 0
	lines, err := p.RunReady(context.Background(), "http://127.0.0.1:9/c/1", 1, 1, nil, func() { calls++ })
	if err != nil || calls != 1 || len(lines) != 1 || !lines[0].OK {
		t.Errorf("RunReady = %+v, %v, %d ready calls; want one ok line, nil, 1 call", lines, err, calls)
	}
	p = Program{Path: "sh", Args: []string{"-c", `echo "ok /r/0"; echo ready`}}
	_, err = p.RunReady(context.Background(), "http://127.0.0.1:9/c/1", 1, 2, nil, func() { t.Error("ready after a result line") })
	var pe *ProgramError
	if !errors.As(err, &pe) || pe.BadLine != "ready" || !errors.Is(err, ErrProgramOutput) {
		t.Errorf("ready after a result: %v; want a ProgramError with BadLine ready", err)
	}
}

// ProgramError says what went wrong in fields the runner can tell apart.
func TestProgramErrorFields(t *testing.T) {
	needSh(t)
	_, err := Program{Path: "/nonexistent/prog"}.Run(context.Background(), "http://127.0.0.1:9/c/1", 1, 1, nil)
	var pe *ProgramError
	if !errors.As(err, &pe) || pe.Start == nil || !strings.Contains(err.Error(), "could not start") {
		t.Errorf("nonexistent program: %v; want a ProgramError with Start set", err)
	}
	_, err = Program{Path: "sh", Args: []string{"-c", `echo hello; exit 3`}}.Run(context.Background(), "http://127.0.0.1:9/c/1", 1, 1, nil)
	if !errors.As(err, &pe) || pe.BadLine != "hello" || pe.ExitCode != 3 || pe.Killed != nil {
		t.Errorf("hello, exit 3: %+v; want BadLine hello, ExitCode 3, not killed", pe)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("the watchdog")
	time.AfterFunc(100*time.Millisecond, func() { cancel(cause) })
	_, err = Program{Path: "sh", Args: []string{"-c", `exec sleep 30`}}.Run(ctx, "http://127.0.0.1:9/c/1", 1, 1, nil)
	if !errors.As(err, &pe) || !errors.Is(pe.Killed, cause) {
		t.Errorf("killed: %+v; want Killed = the context's cause", pe)
	}
}

// TestProgramDescribeStatesItsPolicy: an exec subject states the policy
// its run was given, the fields given and nothing else (full jitter when
// a base is stated without one), and none when given none or only knobs
// no check reads (rate, burst, timeout).
func TestProgramDescribeStatesItsPolicy(t *testing.T) {
	p := Program{Path: "python3", Args: []string{"client.py"}}
	tests := []struct {
		policy  Policy
		want    *Stated
		summary string
	}{
		{Policy{}, nil, "exec: python3 client.py; no stated policy"},
		{Policy{Rate: 5, Burst: 2, Timeout: time.Second}, nil, "exec: python3 client.py; no stated policy"},
		{Policy{MaxAttempts: 8, Budget: 6 * time.Second, Base: 200 * time.Millisecond, Cap: 4 * time.Second, Jitter: "full"},
			&Stated{MaxAttempts: 8, Budget: 6 * time.Second, Base: 200 * time.Millisecond, Cap: 4 * time.Second, Jitter: "full"},
			"exec: python3 client.py; stated policy base=200ms,cap=4s,max_attempts=8,budget=6s,jitter=full"},
		{Policy{Base: 100 * time.Millisecond}, &Stated{Base: 100 * time.Millisecond, Jitter: "full"},
			"exec: python3 client.py; stated policy base=100ms,jitter=full"},
		{Policy{MaxAttempts: 3}, &Stated{MaxAttempts: 3},
			"exec: python3 client.py; stated policy max_attempts=3"},
		{Policy{Base: time.Second, Jitter: "decorrelated"}, &Stated{Base: time.Second, Jitter: "decorrelated"},
			"exec: python3 client.py; stated policy base=1s,jitter=decorrelated"},
	}
	for _, tt := range tests {
		info := p.Describe(Params{Policy: tt.policy})
		if !reflect.DeepEqual(info.Stated, tt.want) || info.Summary != tt.summary {
			t.Errorf("Describe(%+v) = stated %+v, summary %q; want %+v, %q", tt.policy, info.Stated, info.Summary, tt.want, tt.summary)
		}
	}
	if got := (*Stated)(nil).String(); got != "none stated" {
		t.Errorf("nil Stated.String() = %q; want none stated", got)
	}
}

// slowReader yields its chunks one per Read, sleeping gap before each
// but the first.
type slowReader struct {
	chunks []string
	gap    time.Duration
	n      int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.n >= len(r.chunks) {
		return 0, io.EOF
	}
	if r.n > 0 {
		time.Sleep(r.gap)
	}
	r.n++
	return copy(p, r.chunks[r.n-1]), nil
}

// A line is stamped with the read that completed it: lines that arrive
// in one read share its instant, a line split across two reads gets the
// second's.
func TestStampedReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		sr := &stampedReader{r: &slowReader{chunks: []string{"ok r/0\nok r/", "1\nok r/2\n", "ok r/3\n"}, gap: time.Second}}
		sc := bufio.NewScanner(sr)
		var got []time.Duration
		for sc.Scan() {
			got = append(got, sr.at.Sub(t0))
		}
		if want := []time.Duration{0, time.Second, time.Second, 2 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("lines read at %v; want %v", got, want)
		}
	})
}
