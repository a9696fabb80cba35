package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// Output flags. One meaning each, for every command that takes them:
//
//   - --out DIR: the parent directory under which the command creates a
//     directory of its own, named after what it wrote (run: the scenario,
//     subject and time; compare: the scenario and time; report: the
//     timeline's run), so that runs never overwrite each other and shards
//     can share one --out;
//   - -o, --output FILE: the one file the command writes (merge's merged
//     timeline, serve's recording). serve's --record is its deprecated
//     spelling.
//
// The verdict files (--json, --junit, --markdown) are named exactly.

// cmdDoc is what a command's help says besides its flags, which are
// rendered from its flag set so that the help cannot drift from them. The
// one-line description is the command's summary.
type cmdDoc struct {
	// args are the positional arguments, e.g. "SCENARIO|FILE".
	args string
	// required are the flags that must be given: the synopsis shows them
	// outside brackets.
	required []string
	// example is one command line, without "retrylab ".
	example string
	// exit says what the exit status means.
	exit string
	// note, when set, is one more thing the command does, in a line
	// printed after the example.
	note string
}

const (
	verdictExit = "Exit status: 0 PASS, 1 FAIL (a check failed), 2 bad input or usage, 3 INCONCLUSIVE or a run that could not be carried out."
	listExit    = "Exit status: 0, or 2 for bad usage."
)

var cmdDocs = map[string]cmdDoc{
	"run": {
		args:    "SCENARIO|FILE",
		example: "run outage-date --subject retryablehttp --junit out/junit.xml",
		exit:    verdictExit + " With --target: 0 once the fleet's timeline is written (no verdict: merge and analyze it).",
	},
	"serve": {
		example: "serve --scenario outage-date -o t.ndjson",
		note:    "Control API for test suites on the same listener: GET /_retrylab/status, /verdict, /recording; POST /_retrylab/reset[?scenario=NAME] (docs/serve-api.md).",
		exit:    "Exit status: 0 when stopped by SIGINT, SIGTERM or --duration, 2 bad input or usage, 3 could not serve (the port in use, the recording not writable).",
	},
	"analyze": {
		args:    "TIMELINE",
		example: "analyze t.ndjson --markdown verdict.md",
		exit:    verdictExit,
	},
	"report": {
		args:    "TIMELINE",
		example: "report t.ndjson --out reports",
		exit:    "Exit status: 0 when the report is written (whatever the verdict), 2 bad input or usage, 3 it could not be written.",
	},
	"compare": {
		args:     "SCENARIO|FILE",
		required: []string{"subjects"},
		example:  "compare outage-date --subjects retrylab,retryablehttp,backoff --seeds 3",
		exit:     "Exit status: the first subject's verdict over its runs: 0 PASS, 1 FAIL (a check failed in any run), 2 bad input or usage, 3 INCONCLUSIVE (any run) or a run that could not be carried out.",
	},
	"merge": {
		args:     "FILE|DIR...",
		required: []string{"output"},
		example:  "merge -o merged.ndjson stub-a.ndjson stub-b.ndjson out/",
		exit:     "Exit status: 0 when merged (warnings on stderr), 2 bad input (files not of one run, a shard missing or given twice), 3 the output could not be written.",
	},
	"scenarios": {example: "scenarios", exit: listExit},
	"subjects":  {example: "subjects", exit: listExit},
	"version":   {example: "version", exit: listExit},
}

// newFlags returns the flag set of the command name: its errors name the
// flag and come back as usage errors (exit 2), and its --help is rendered
// by writeHelp.
func newFlags(name string, e *env) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.SortFlags = false
	fs.Usage = func() { writeHelp(e.stderr, name, fs) }
	if e.flags != nil {
		*e.flags = fs
	}
	return fs
}

// writeHelp writes the help of the command name, whose flags are fs's.
func writeHelp(w io.Writer, name string, fs *pflag.FlagSet) {
	doc := cmdDocs[name]
	fmt.Fprintf(w, "retrylab %s: %s\n\nUsage:\n", name, commands[name].summary)
	writeWrapped(w, synopsis(name, doc, fs), "  ", "      ")
	fmt.Fprintf(w, "\nExample:\n  retrylab %s\n", doc.example)
	if doc.note != "" {
		fmt.Fprintln(w)
		writeWrapped(w, doc.note, "", "")
	}
	fmt.Fprintf(w, "\nFlags:\n")
	if !hasVisibleFlags(fs) {
		fmt.Fprintln(w, "  (none)")
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		fmt.Fprintf(w, "  %s\n", flagTerm(f))
		writeWrapped(w, flagText(f), "        ", "        ")
	})
	fmt.Fprintln(w)
	writeWrapped(w, doc.exit, "", "")
}

func hasVisibleFlags(fs *pflag.FlagSet) bool {
	any := false
	fs.VisitAll(func(f *pflag.Flag) { any = any || !f.Hidden })
	return any
}

// synopsis is "retrylab NAME REQUIRED... ARGS [OPTIONAL]...", from fs.
func synopsis(name string, doc cmdDoc, fs *pflag.FlagSet) string {
	parts := []string{"retrylab", name}
	for _, r := range doc.required {
		if f := fs.Lookup(r); f != nil {
			parts = append(parts, unbroken(flagSpelling(f, true)))
		}
	}
	if doc.args != "" {
		parts = append(parts, doc.args)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || isRequired(doc, f.Name) {
			return
		}
		parts = append(parts, unbroken("["+flagSpelling(f, true)+"]"))
	})
	return strings.Join(parts, " ")
}

// unbroken keeps s on one line when it is wrapped.
func unbroken(s string) string { return strings.ReplaceAll(s, " ", nbsp) }

// nbsp stands for a space writeWrapped does not break at.
const nbsp = "\x00"

func isRequired(doc cmdDoc, name string) bool {
	for _, r := range doc.required {
		if r == name {
			return true
		}
	}
	return false
}

// flagSpelling is "--name ARG", "-o ARG" (short, when the flag has one)
// or "--name" for a boolean.
func flagSpelling(f *pflag.Flag, short bool) string {
	s := "--" + f.Name
	if short && f.Shorthand != "" {
		s = "-" + f.Shorthand
	}
	if arg := placeholder(f); arg != "" {
		s += " " + arg
	}
	return s
}

// flagTerm is the flag's line in the list: "-o, --output FILE" or
// "    --quiet". A boolean prints without pflag's "[=true|false]".
func flagTerm(f *pflag.Flag) string {
	lead := "    "
	if f.Shorthand != "" {
		lead = "-" + f.Shorthand + ", "
	}
	return lead + flagSpelling(f, false)
}

// placeholder names a flag's value: the `quoted` word of its usage, else
// one by its type; "" for a boolean.
func placeholder(f *pflag.Flag) string {
	name, _ := pflag.UnquoteUsage(f)
	if strings.Contains(f.Usage, "`") {
		return name
	}
	switch f.Value.Type() {
	case "bool":
		return ""
	case "int", "int64", "uint", "uint64":
		return "N"
	case "duration":
		return "D"
	case "stringSlice", "stringArray":
		return "LIST"
	}
	return "VALUE"
}

// flagText is the flag's usage with its default, when it has one worth
// saying that the usage does not already state.
func flagText(f *pflag.Flag) string {
	_, usage := pflag.UnquoteUsage(f)
	switch f.DefValue {
	case "", "0", "false", "[]", "0s":
	default:
		if !strings.Contains(usage, "(default") {
			def := f.DefValue
			if f.Value.Type() == "string" {
				def = fmt.Sprintf("%q", def)
			}
			usage += " (default " + def + ")"
		}
	}
	if f.Deprecated != "" {
		usage += " (deprecated: " + f.Deprecated + ")"
	}
	return usage
}

// helpWidth is the width help text is wrapped to.
const helpWidth = 80

// writeWrapped writes text in lines of at most helpWidth columns (a word
// longer than that stands alone), the first indented by first, the rest by
// rest. A continuation line never begins with a word that starts with "-",
// so that no line but a flag's own reads as one.
func writeWrapped(w io.Writer, text, first, rest string) {
	words := strings.Fields(text)
	var line strings.Builder
	line.WriteString(first)
	n := 0 // words on the line
	for _, word := range words {
		if n > 0 && line.Len()+1+len(word) > helpWidth && !strings.HasPrefix(word, "-") {
			fmt.Fprintln(w, strings.ReplaceAll(line.String(), nbsp, " "))
			line.Reset()
			line.WriteString(rest)
			n = 0
		}
		if n > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(word)
		n++
	}
	if n > 0 {
		fmt.Fprintln(w, strings.ReplaceAll(line.String(), nbsp, " "))
	}
}
