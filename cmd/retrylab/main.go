// Command retrylab load-tests the retry logic of HTTP clients: it throttles
// them with a stub server, records every attempt, and judges the timeline.
//
// Exit status: 0 PASS, 1 FAIL (a check failed), 2 bad input or usage, 3
// INCONCLUSIVE (the run could not be vouched for) or a run that could not
// be carried out. Commands that judge nothing (serve, report, merge) exit
// 0, 2 or 3; each command's --help says which.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/runner"
	_ "github.com/retrylab/retrylab/subjects/grpcsubjects" // registers the gRPC clients as subjects, and the stub's gRPC front end
	_ "github.com/retrylab/retrylab/subjects/thirdparty"   // registers the third-party retry libraries as subjects
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if isProbe(os.Args) {
		os.Exit(noise.ProbeMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	// The signals are never released: a detached run's fleet holds
	// contexts derived from ctx, and canceling it would wake every one of
	// them (seconds with 200,000 clients in flight) just before the
	// process exits anyway.
	ctx, _ := notifySignals(context.Background())
	// The process exits after the command: a run need not wait for its
	// fleet and stub to wind down once its timeline is written.
	err := runEnv(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, tty: isTerminal(os.Stderr), exits: true}, os.Args[1:])
	os.Exit(exitCode(err, os.Stderr))
}

// notifySignals returns a context canceled at the first SIGINT or SIGTERM
// with the cause *runner.Interrupt naming the signal, so that a run
// records which one stopped it. A second signal takes its default action
// (the process dies at once, without flushing). stop releases the
// signals.
func notifySignals(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&runner.Interrupt{Signal: signalName(s)})
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(done)
			signal.Stop(ch)
			cancel(nil)
		})
	}
}

// signalName is the conventional name of s ("SIGINT", "SIGTERM").
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // the verdict failed
	exitUsage  = 2 // bad input: flags, scenario, timeline
	exitError  = 3 // INCONCLUSIVE, or the run could not be carried out
)

// errVerdictFailed is returned when a verdict was printed and failed; the
// verdict itself is the message, so nothing more is printed.
var errVerdictFailed = errors.New("verdict failed")

// usageError is bad input: a flag, an argument, a scenario or a timeline.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// badInput marks err as bad input (exit 2) unless it is nil.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	return &usageError{err}
}

func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errVerdictFailed):
		return exitFailed
	case errors.Is(err, pflag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "retrylab: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "retrylab: %v\n", err)
		return exitError
	}
}

// env is what a subcommand may touch of the outside world.
type env struct {
	stdout, stderr io.Writer
	// tty is true when stderr is a terminal (progress bars are drawn).
	tty bool
	// createTimeline creates a run's timeline file (nil:
	// runner.CreateTimeline); tests give one that fails as a full disk
	// does.
	createTimeline func(path string) (*os.File, error)
	// exits is true in the process's main, which exits when the command
	// returns: `run` then leaves its fleet to wind down in the background
	// (runner.RunOptions.Detach). Tests run commands in-process.
	exits bool
	// flags, when set, receives each flag set newFlags makes (tests
	// read the flags a command defines).
	flags **pflag.FlagSet
}

type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"serve":     {"run the throttling stub server for a client outside the harness", cmdServe},
		"version":   {"print the version", cmdVersion},
		"help":      {"show help for a command", cmdHelp},
		"scenarios": {"list the built-in scenarios", cmdScenarios},
		"run":       {"run a scenario against a subject and judge it", cmdRun},
		"analyze":   {"judge a recorded timeline", cmdAnalyze},
		"report":    {"write the HTML report of a timeline", cmdReport},
		"compare":   {"run several subjects on one scenario and rank them", cmdCompare},
		"merge":     {"join the stubs' recordings and the fleet shards' timelines of one run", cmdMerge},
		"subjects":  {"list the subjects (libraries under test)", cmdSubjects},
	}
}

// run is the whole program, testable in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runEnv(ctx, &env{stdout: stdout, stderr: stderr, tty: isTerminal(stderr)}, args)
}

// runEnv runs the command args name in e.
func runEnv(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		printUsage(e.stderr)
		return usagef("no command given")
	}
	name := args[0]
	if name == "-h" || name == "--help" {
		printUsage(e.stdout)
		return nil
	}
	if name == "-v" || name == "--version" {
		name = "version"
	}
	cmd, ok := commands[name]
	if !ok {
		printUsage(e.stderr)
		return usagef("unknown command %q", name)
	}
	if wantsHelp(args[1:]) {
		// Asked for, help is the output: stdout, as `retrylab help CMD`
		// writes it (a usage error still writes it to stderr).
		e2 := *e
		e2.stderr = e.stdout
		e = &e2
	}
	return cmd.run(ctx, e, args[1:])
}

// wantsHelp reports whether args ask for help (-h or --help before --).
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--help":
			return true
		}
	}
	return false
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "retrylab load-tests the retry logic of HTTP clients.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: retrylab COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'retrylab help COMMAND' for a command's flags.")
	fmt.Fprintln(w, "Exit status: 0 PASS, 1 FAIL, 2 bad input or usage, 3 INCONCLUSIVE or a run that could not be carried out.")
}

// parseFlags parses args, mapping errors to usage errors.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return &usageError{err}
	}
	return nil
}

func cmdVersion(ctx context.Context, e *env, args []string) error {
	fs := newFlags("version", e)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintf(e.stdout, "retrylab %s\n", version)
	return nil
}

func cmdHelp(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		printUsage(e.stdout)
		return nil
	}
	if args[0] == "help" || wantsHelp(args[:1]) {
		printUsage(e.stdout)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usagef("unknown command %q", args[0])
	}
	e2 := *e
	e2.stderr = e.stdout
	err := cmd.run(ctx, &e2, []string{"--help"})
	if errors.Is(err, pflag.ErrHelp) {
		return nil
	}
	return err
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && !strings.EqualFold(os.Getenv("TERM"), "dumb")
}
