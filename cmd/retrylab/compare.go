package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/reports"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/subjects"
)

func cmdCompare(ctx context.Context, e *env, args []string) error {
	var (
		o     runOptions
		names []string
		seeds int
	)
	fs := newFlags("compare", e)
	fs.StringSliceVar(&names, "subjects", nil, "the subjects to compare, `A,B,C`; the exit status is the first one's verdict")
	fs.IntVar(&seeds, "seeds", 1, "runs per subject, with seeds --seed, --seed+1, ...")
	o.register(fs)
	fs.MarkHidden("subject") // --subjects names them all
	o.verdict.registerSelection(fs)
	fs.StringVar(&o.verdict.json, "json", "", "write the comparison as JSON to `FILE`: the ranking, each subject's verdict and key figures, every run's verdict (-: stdout, the text then on stderr)")
	fs.StringVar(&o.verdict.junit, "junit", "", "write the comparison as JUnit XML to `FILE` (one testsuite per run, one testcase per check; -: stdout, the text then on stderr)")
	fs.StringVar(&o.verdict.markdown, "markdown", "", "write the comparison as Markdown to `FILE`: the ranking and every run's verdict (PR comment, $GITHUB_STEP_SUMMARY; -: stdout, the text then on stderr)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	e, err := o.verdict.redirect(e)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("compare takes one scenario (a built-in name or a file), got %d arguments", fs.NArg())
	}
	if len(names) == 0 {
		return usagef("--subjects must name at least one subject")
	}
	if seeds < 1 || seeds > 100 {
		return usagef("--seeds must be between 1 and 100, got %d", seeds)
	}
	if err := o.validate(fs.Changed); err != nil {
		return err
	}
	aopts, err := o.verdict.options()
	if err != nil {
		return err
	}
	sc, _, err := resolveRun(fs.Arg(0), names[0])
	if err != nil {
		return err
	}
	o.applyPolicy(sc)
	subjs := make([]subjects.Subject, len(names))
	for i, n := range names {
		if subjs[i], err = subjects.Lookup(n); err != nil {
			return usagef("--subjects %q: %v (see 'retrylab subjects')", n, err)
		}
	}

	if err := checkWritable(o.out, o.verdict.files()); err != nil {
		return err
	}
	dir, err := runner.NewRunDir(o.out, fmt.Sprintf("compare-%s-%s", sc.Name, time.Now().Format("20060102-150405")))
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var entries []reports.CompareEntry
	_, err = runner.Compare(ctx, sc, runner.CompareOptions{
		Subjects: subjs, Names: names, Seeds: seeds, Dir: dir, Create: e.createTimeline,
		Run: runner.RunOptions{Seed: o.seed},
		Setup: func(r *runner.CompareRun, ro *runner.RunOptions) (func(), error) {
			rs := o
			rs.seed, rs.runID = r.Seed, r.ID // every run its own quota
			opts, done, err := runSetup(e, sc, r.Subject, rs, r.Dir)
			opts.Detach = ro.Detach // the next run must not share the CPU with this one's wind-down
			*ro = opts
			return done, err
		},
		Each: func(r *runner.CompareRun, err error) error {
			sum, err := runResult(e, r.Summary, err)
			if sum != nil {
				printHarness(e.stderr, sum)
				for _, f := range harnessFacts(sum) {
					fmt.Fprintf(e.stderr, "retrylab: %s seed %d: %s\n", r.Name, r.Seed, f)
				}
			}
			if err != nil {
				return err
			}
			v, col, err := judgeFile(sum.TimelinePath, aopts, !o.noReport)
			if err != nil {
				return err
			}
			entry := reports.CompareEntry{Subject: r.Name, Seed: r.Seed, Verdict: v, Timeline: sum.TimelinePath}
			if col != nil {
				rep, err := col.Write(r.Dir, v)
				if err != nil {
					return fmt.Errorf("report: %w", err)
				}
				entry.Stats = &rep.Stats
				entry.Report = filepath.Join(filepath.Base(r.Dir), reports.ReportFile)
			}
			entries = append(entries, entry)
			line := fmt.Sprintf("%-20s seed %-3d %s", r.Name, r.Seed, v.Word())
			if failed := v.Failed(); len(failed) > 0 {
				line += " (" + strings.Join(failed, ", ") + ")"
			}
			fmt.Fprintln(e.stdout, line)
			for _, why := range v.Inconclusive {
				fmt.Fprintf(e.stdout, "  ? %s\n", why)
			}
			return nil
		},
	})
	var ce *runner.CreateError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("--out: %w", err)
	case err != nil:
		return err
	}
	cmp, err := reports.Compare(dir, entries, reports.CompareOptions{Scenario: sc.Name})
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	fmt.Fprintln(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tSUBJECT\tVERDICT\tFAILED CHECKS")
	for i, r := range cmp.Ranking {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", i+1, r.Subject, strings.ToUpper(r.Verdict), strings.Join(r.Failed, ", "))
	}
	tw.Flush()
	fmt.Fprintf(e.stdout, "\ncomparison: %s\n", cmp.HTML)
	if err := writeComparison(o.verdict, cmp); err != nil {
		return err
	}
	// The exit status is the first-named subject's verdict over its runs:
	// 1 if any run failed a check, else 3 if any was inconclusive.
	for _, s := range cmp.Subjects {
		if s.Subject != names[0] {
			continue
		}
		switch s.Verdict {
		case analyzer.VerdictFail:
			return errVerdictFailed
		case analyzer.VerdictInconclusive:
			return errVerdictInconclusive
		}
	}
	return nil
}

// writeComparison writes the comparison files the flags name, each whole
// or not at all.
func writeComparison(v verdictFlags, c *reports.Comparison) error {
	ranking := c.AnalyzerRanking()
	for _, o := range []struct {
		flag, path string
		write      func(io.Writer, string, []analyzer.Ranked, []analyzer.RankRun) error
	}{
		{"--json", v.json, analyzer.WriteRankingJSON},
		{"--junit", v.junit, analyzer.WriteRankingJUnit},
		{"--markdown", v.markdown, analyzer.WriteRankingMarkdown},
	} {
		if o.path == "" {
			continue
		}
		if err := v.writeOut(o.path, func(w io.Writer) error { return o.write(w, c.Scenario, ranking, c.Runs) }); err != nil {
			return fmt.Errorf("%s: %w", o.flag, err)
		}
	}
	return nil
}
