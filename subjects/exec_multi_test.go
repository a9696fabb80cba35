package subjects

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RunClients gives the program its clients, their URL prefix and the
// requests per client, and keeps lines that name one of its clients.
func TestProgramRunClients(t *testing.T) {
	needSh(t)
	script := `echo "$RETRYLAB_CLIENTS $RETRYLAB_BASE_URL_PREFIX $RETRYLAB_REQUESTS [$RETRYLAB_BASE_URL$RETRYLAB_CLIENT]" >&2
echo ready; echo "ok /c/3/r/0"; echo "fail ${RETRYLAB_BASE_URL_PREFIX}7/r/0 gave-up"; exit 1`
	p := Program{Path: "sh", Args: []string{"-c", script}}
	readies := 0
	before := time.Now()
	lines, err := p.RunClients(context.Background(), "http://127.0.0.1:9/c/", []int{3, 7}, 1, nil, func() { readies++ })
	lines = readStamps(t, lines, before, time.Now())
	var pe *ProgramError
	if !errors.As(err, &pe) || pe.ExitCode != 1 || pe.Stderr != "3,7 http://127.0.0.1:9/c/ 1 []\n" {
		t.Fatalf("RunClients error %+v; want exit status 1 with the environment on stderr", err)
	}
	want := []ProgramLine{{OK: true, Path: "/c/3/r/0"}, {Path: "http://127.0.0.1:9/c/7/r/0", Reason: "gave-up"}}
	if !reflect.DeepEqual(lines, want) || readies != 1 {
		t.Errorf("lines %+v, %d ready calls; want %+v, 1", lines, readies, want)
	}
	if lines[1].Client() != 7 {
		t.Errorf("Client() = %d; want 7", lines[1].Client())
	}
}

// A process playing several clients must name the client in every line;
// the errors say what was wanted.
func TestProgramRunClientsLineFaults(t *testing.T) {
	needSh(t)
	tests := []struct {
		name, script string
		lines        int
		want         string
	}{
		{"bare r/N", `echo "ok r/0"`, 0,
			`stdout line 1: "ok r/0": PATH names no client: this process plays several clients (RETRYLAB_CLIENTS), so a result line must name one: /c/{client}/r/N or the request's URL`},
		{"bare /r/N", `echo "ok /c/1/r/0"; echo "fail /r/1 error"`, 1, `line 2: "fail /r/1 error": PATH names no client`},
		{"a client it does not play", `echo "ok /c/2/r/0"`, 0,
			`stdout line 1: "ok /c/2/r/0": PATH names client 2, which this process does not play (RETRYLAB_CLIENTS=1,3-5)`},
		{"out of range", `echo "ok /c/4/r/2"`, 0, `no such request: each client has 2 requests, /r/0 … /r/1`},
		{"duplicate", `echo "ok /c/4/r/1"; echo "ok /c/5/r/1"; echo "fail ${RETRYLAB_BASE_URL_PREFIX}4/r/1 error"`, 2,
			`stdout line 3: "fail http://127.0.0.1:9/c/4/r/1 error": a second result line for /c/4/r/1 (the first was line 1): want one per request`},
	}
	for _, tt := range tests {
		p := Program{Path: "sh", Args: []string{"-c", tt.script}}
		lines, err := p.RunClients(context.Background(), "http://127.0.0.1:9/c/", []int{1, 3, 4, 5}, 2, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrProgramOutput) {
			t.Errorf("%s: RunClients error = %v; want one containing %s", tt.name, err, tt.want)
		}
		if len(lines) != tt.lines {
			t.Errorf("%s: kept %d lines; want %d", tt.name, len(lines), tt.lines)
		}
	}
}

// A client list too long for the environment is refused before the
// program starts, naming the variable and the remedy.
func TestProgramRunClientsTooMany(t *testing.T) {
	ids := make([]int, 0, 40000)
	for i := range 40000 {
		ids = append(ids, i*2)
	}
	_, err := Program{Path: "sh"}.RunClients(context.Background(), "http://127.0.0.1:9/c/", ids, 1, nil, nil)
	var pe *ProgramError
	if !errors.As(err, &pe) || pe.Start == nil || !strings.Contains(err.Error(), "RETRYLAB_CLIENTS would be") || !strings.Contains(err.Error(), "fleet.processes") {
		t.Errorf("40,000 clients: %v; want a start error naming RETRYLAB_CLIENTS and fleet.processes", err)
	}
	keys := []string{"RETRYLAB_API_KEYS=" + strings.Repeat("k", MaxClientsEnv)}
	_, err = Program{Path: "sh"}.RunClients(context.Background(), "http://127.0.0.1:9/c/", []int{1, 2}, 1, keys, nil)
	if !errors.As(err, &pe) || pe.Start == nil || !strings.Contains(err.Error(), "RETRYLAB_API_KEYS would be") {
		t.Errorf("long keys: %v; want a start error naming RETRYLAB_API_KEYS", err)
	}
}

func TestFormatParseClients(t *testing.T) {
	tests := []struct {
		ids  []int
		want string
	}{
		{[]int{0}, "0"},
		{[]int{0, 1}, "0,1"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{1, 5, 9}, "1,5,9"},
		{[]int{0, 1, 2, 7, 8, 10, 11, 12, 13}, "0-2,7,8,10-13"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := FormatClients(tt.ids); got != tt.want {
			t.Errorf("FormatClients(%v) = %q; want %q", tt.ids, got, tt.want)
		}
		if tt.ids == nil {
			continue
		}
		if back, err := ParseClients(tt.want, 100); err != nil || !slices.Equal(back, tt.ids) {
			t.Errorf("ParseClients(%q) = %v, %v; want %v", tt.want, back, err, tt.ids)
		}
	}
	bad := []struct{ in, want string }{
		{"", `RETRYLAB_CLIENTS col 1: "": want a client id or a range A-B`},
		{"1,,2", `RETRYLAB_CLIENTS col 3: "": want a client id`},
		{"3,2", `RETRYLAB_CLIENTS col 3: "2": ids must increase`},
		{"0-2,2", `col 5: "2": ids must increase`},
		{"5-3", `col 1: "5-3": a range must not run backwards`},
		{"01", `col 1: "01": want a client id`},
		{"1-x", `col 1: "1-x": want a client id`},
		{"0-200", `col 1: "0-200": more than 100 clients`},
	}
	for _, tt := range bad {
		if _, err := ParseClients(tt.in, 100); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseClients(%q) error = %v; want one containing %s", tt.in, err, tt.want)
		}
	}
}

func FuzzParseClients(f *testing.F) {
	for _, s := range []string{"0", "0-3,7,9-12", "1,5,9", "", "3,2", "01", "5-3", "1-", "-1", "0-999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := ParseClients(s, 1000)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "RETRYLAB_CLIENTS col ") {
				t.Fatalf("ParseClients(%q) error %v: want one naming the column", s, err)
			}
			return
		}
		if len(ids) == 0 || len(ids) > 1000 {
			t.Fatalf("ParseClients(%q) = %d ids", s, len(ids))
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("ParseClients(%q) = %v: not increasing", s, ids)
			}
		}
		// Written back, the list parses to the same ids.
		again, err := ParseClients(FormatClients(ids), 1000)
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("round trip of %q via %q = %v, %v; want %v", s, FormatClients(ids), again, err, ids)
		}
	})
}

// A program killed at its deadline whose stdout is still held open (here
// by a child that left its process group) has its pipe closed under the
// reader: that is the kill (Killed), not a failure to read stdout.
func TestProgramKilledPipeClosed(t *testing.T) {
	needSh(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	pidFile := t.TempDir() + "/pid"
	p := Program{Path: "sh", Args: []string{"-c", `setsid sh -c 'echo $$ > "$PIDFILE"; exec sleep 30' & echo "ok /r/0"; exec sleep 30`},
		Env: []string{"PIDFILE=" + pidFile}, Timeout: 300 * time.Millisecond}
	lines, err := p.Run(context.Background(), "http://127.0.0.1:9/c/1", 1, 2, nil)
	if b, rerr := os.ReadFile(pidFile); rerr == nil {
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
			syscall.Kill(pid, syscall.SIGKILL) // the child that escaped
		}
	}
	var pe *ProgramError
	if !errors.As(err, &pe) || pe.Killed == nil || pe.Read != nil || len(lines) != 1 {
		t.Errorf("Run = %d lines, %+v; want 1 line, Killed set, no Read error", len(lines), err)
	}
}
