package findings

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/internal/doccheck"
	"github.com/retrylab/retrylab/subjects"
)

// table returns the Markdown table that starts with a line beginning with
// head in doc: its lines up to the first one that is not a table row.
func table(doc, head string) string {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, head) {
			continue
		}
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "|") {
			j++
		}
		return strings.Join(lines[i:j], "\n")
	}
	return ""
}

// TestReadmeLibraryTable: the README's "What retrylab finds" table is the
// verdict table of docs/libraries.md, row for row.
func TestReadmeLibraryTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	libs, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	head := "| library | version |"
	want := table(string(libs), head)
	if want == "" {
		t.Fatalf("%s has no table starting %q", docPath, head)
	}
	if got := table(string(readme), head); got != want {
		t.Errorf("README.md's library table differs from %s's verdicts: %s\ncopy the table under \"## Verdicts\" of %s into the README",
			docPath, doccheck.FirstDiff(got, want), docPath)
	}
}

// TestReadmeControls: the README lists exactly the negative controls
// subjects registers.
func TestReadmeControls(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "- Negative controls,")
	if !ok {
		t.Fatal("README.md has no \"- Negative controls,\" item")
	}
	item, _, _ := strings.Cut(rest, "\n- ")
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(item, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	if want := subjects.Controls(); !slices.Equal(listed, want) {
		t.Errorf("README.md lists the negative controls %v; subjects has %v", listed, want)
	}
}
