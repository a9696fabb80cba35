package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

func cmdScenarios(ctx context.Context, e *env, args []string) error {
	fs := newFlags("scenarios", e)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("scenarios takes no arguments")
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDURATION\tCLIENTS\tWHAT IT EXPOSES")
	for _, sc := range scenarios.Builtins() {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\n", sc.Name, sc.Duration, sc.Fleet.Clients, sc.Description)
	}
	return tw.Flush()
}

func cmdSubjects(ctx context.Context, e *env, args []string) error {
	fs := newFlags("subjects", e)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("subjects takes no arguments")
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tWHAT IT IS")
	for _, name := range subjects.Names() {
		s, err := subjects.Lookup(name)
		if err != nil {
			return err
		}
		var info subjects.Info
		if d, ok := s.(subjects.Describer); ok {
			info = d.Describe(subjects.Params{})
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, info.Version, firstLine(info.Summary))
	}
	return tw.Flush()
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
