package validation_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/subjects"
)

// libraryScenarios are the scenarios of the README's library table.
var libraryScenarios = []string{"outage-bare", "outage-date", "outage-delta", "malformed-retry-after", "budget-trip"}

// librariesMarkdown runs every third-party subject (not retrylab, not a
// control, not exec) at its defaults through libraryScenarios, seed 1, and
// renders what the verdicts show, whatever it is: nothing is asserted but
// that the runs complete. TestValidationMatrix appends it to the doc.
func librariesMarkdown(t *testing.T) string {
	var libs []string
	for _, name := range subjects.Names() {
		s, err := subjects.Lookup(name)
		if err != nil || name == "retrylab" || slices.Contains(subjects.Controls(), name) || subjects.CheckVirtual(s) != nil {
			continue
		}
		libs = append(libs, name)
	}
	var b strings.Builder
	b.WriteString("| library | version |")
	for _, sc := range libraryScenarios {
		fmt.Fprintf(&b, " %s |", sc)
	}
	b.WriteString("\n|---|---|")
	for range libraryScenarios {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var evidence strings.Builder
	for _, lib := range libs {
		version := ""
		fmt.Fprintf(&b, "| `%s` |", lib)
		var cells []string
		for _, sc := range libraryScenarios {
			var v *analyzer.Verdict
			t.Run(lib+"/"+sc, func(t *testing.T) {
				v = retrylabtest.Run(t, sc, lib).Verdict
			})
			if v == nil {
				cells = append(cells, "run failed")
				continue
			}
			version = v.Figures.Version
			failed := v.Failed()
			if len(failed) == 0 {
				cells = append(cells, "✓")
			} else {
				cells = append(cells, "✗ "+strings.Join(failed, ", "))
				for _, id := range failed {
					c := v.Check(id)
					line := c.Reason
					if len(c.Examples) > 0 {
						line = c.Examples[0].Detail
					}
					fmt.Fprintf(&evidence, "- `%s` × %s — `%s` %s: %s\n", lib, sc, id, figure(c), line)
				}
			}
			for _, w := range v.Warnings {
				if w.ID == analyzer.WarnServerSync {
					cells[len(cells)-1] += " ⚠ sync"
				}
			}
		}
		fmt.Fprintf(&b, " %s | %s |\n", version, strings.Join(cells, " | "))
	}
	return "\n# Third-party retry libraries at their defaults\n\n" +
		"Each library runs at its own defaults (the scenario's policy is ignored where the\n" +
		"adapter says so) through the outage and malformed-header scenarios, seed 1, in\n" +
		"virtual time, judged with each scenario's `expect.checks`. ✓ passes, ✗ lists the\n" +
		"failed checks, ⚠ sync marks the server-induced synchronization warning. The\n" +
		"version is the library's module version.\n\n" +
		b.String() + "\nEvidence (first example of each failed check):\n\n" + evidence.String()
}
