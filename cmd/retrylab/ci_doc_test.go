package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recipe returns the fenced block that follows `<!-- ci-recipe: name -->`
// in docs/ci.md.
func recipe(t *testing.T, doc, name string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "<!-- ci-recipe: "+name+" -->\n")
	if !ok {
		t.Fatalf("docs/ci.md has no ci-recipe %s", name)
	}
	_, block, _ := strings.Cut(after, "\n") // the opening fence
	block, _, _ = strings.Cut(block, "```")
	return block
}

// githubCommands returns the scripts of the job's `run: |` steps (the
// one-line `run:` that builds retrylab is the set-up, not run here).
func githubCommands(block string) []string {
	var out []string
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) != "run: |" {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		var script []string
		for i+1 < len(lines) {
			n := lines[i+1]
			if strings.TrimSpace(n) != "" && len(n)-len(strings.TrimLeft(n, " ")) <= indent {
				break
			}
			script = append(script, strings.TrimSpace(n))
			i++
		}
		out = append(out, strings.Join(script, "\n"))
	}
	return out
}

// gitlabCommands returns the items of the job's script: list (its
// before_script: installs retrylab).
func gitlabCommands(block string) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		l := sc.Text()
		switch t := strings.TrimSpace(l); {
		case t == "script:":
			in = true
		case in && strings.HasPrefix(t, "- "):
			if cmd := strings.TrimPrefix(t, "- "); !strings.HasPrefix(cmd, "go install ") {
				out = append(out, cmd)
			}
		case in:
			in = false
		}
	}
	return out
}

// TestCIRecipes runs the shell commands of docs/ci.md's GitHub Actions and
// GitLab CI jobs with a built retrylab first on PATH, in a scratch
// directory: with a subject that passes they exit 0; with one that fails
// the judging command exits 1 and the publishing steps (which run always)
// still find the JUnit report and the Markdown verdict, and append it to
// the summary. The go test gate must be the one retrylabtest runs.
func TestCIRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it four times")
	}
	b, err := os.ReadFile("../../docs/ci.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "retrylab"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	jobs := map[string][]string{
		"github": githubCommands(recipe(t, doc, "github")),
		"gitlab": gitlabCommands(recipe(t, doc, "gitlab")),
	}
	if n := len(jobs["github"]); n != 2 {
		t.Fatalf("github recipe has %d run: | steps %q; want 2 (judge, summary)", n, jobs["github"])
	}
	if n := len(jobs["gitlab"]); n != 1 {
		t.Fatalf("gitlab recipe has %d script commands %q; want 1", n, jobs["gitlab"])
	}
	for job, cmds := range jobs {
		for subject, want := range map[string]int{"retrylab": exitOK, "retry-4xx": exitFailed} {
			t.Run(job+"/"+subject, func(t *testing.T) {
				dir := t.TempDir()
				summary := filepath.Join(dir, "summary.md")
				for i, c := range cmds {
					sh := exec.Command("bash", "-e", "-c", c) // GitHub's run: shell; GitLab's runs each line likewise
					sh.Dir = dir
					sh.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "SUBJECT="+subject, "GITHUB_STEP_SUMMARY="+summary)
					out, err := sh.CombinedOutput()
					code := sh.ProcessState.ExitCode()
					if i == 0 && code != want {
						t.Fatalf("%s: exit %d (%v); want %d\n%s", c, code, err, want, out)
					}
					if i > 0 && code != 0 {
						t.Errorf("%s: exit %d; want 0 (it runs always)\n%s", c, code, out)
					}
				}
				for _, f := range []string{"out/junit.xml", "out/verdict.md"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
						t.Errorf("%s: %v; the publishing steps need it", f, err)
					}
				}
				if html, _ := filepath.Glob(filepath.Join(dir, "out/*/report.html")); len(html) != 1 {
					t.Errorf("out/ holds reports %v; want one to upload", html)
				}
				junit, _ := os.ReadFile(filepath.Join(dir, "out/junit.xml"))
				if want == exitFailed && !strings.Contains(string(junit), "<failure") {
					t.Errorf("junit.xml of a failed verdict has no failure:\n%s", junit)
				}
				if job == "github" {
					s, err := os.ReadFile(summary)
					if err != nil || !strings.Contains(string(s), "retrylab") {
						t.Errorf("step summary %q, %v; want the Markdown verdict", s, err)
					}
				}
			})
		}
	}

	// No release is tagged, so no recipe may install with go install
	// …@version: each checks out retrylab at $RETRYLAB_REF and builds
	// ./cmd/retrylab there, as this test built it above.
	if strings.Contains(doc, "@latest") {
		t.Errorf("docs/ci.md installs with @latest, which cannot work before the first release")
	}
	for _, job := range []string{"github", "gitlab"} {
		block := recipe(t, doc, job)
		if strings.Contains(block, "go install") || !strings.Contains(block, "go build -o") || !strings.Contains(block, "./cmd/retrylab") || !strings.Contains(block, "RETRYLAB_REF") {
			t.Errorf("the %s recipe does not build ./cmd/retrylab from a checkout at $RETRYLAB_REF:\n%s", job, block)
		}
	}

	gate := strings.TrimSpace(recipe(t, doc, "go-test"))
	src, err := os.ReadFile("../../retrylabtest/ci_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), gate) {
		t.Errorf("docs/ci.md's go test gate is not retrylabtest/ci_example_test.go's:\n%s", gate)
	}
}

// TestCIRecipesAnyLanguage runs the shell commands of docs/ci.md's two
// jobs that gate a Python SDK, in a scratch directory laid out as the SDK's
// repository: its exec program is examples/python/client.py (as the page
// says to start from), the retrylab checkout is this repository. With the
// recipe's SUBJECT every scenario passes (exit 0); with the program's
// retry-4xx mistake the judging command exits 1 on not-found, whose JUnit
// report names the failed check, and the summary step still runs.
func TestCIRecipesAnyLanguage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs exec subjects for about a minute")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not installed; .ci/run installs it")
		}
		t.Skip("python3 is not installed")
	}
	b, err := os.ReadFile("../../docs/ci.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	client, err := os.ReadFile(filepath.Join(repo, "examples/python/client.py"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "retrylab"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	jobs := map[string][]string{
		"github-python": githubCommands(recipe(t, doc, "github-python")),
		"gitlab-python": gitlabCommands(recipe(t, doc, "gitlab-python")),
	}
	if n := len(jobs["github-python"]); n != 2 {
		t.Fatalf("github-python recipe has %d run: | steps %q; want 2 (judge, summary)", n, jobs["github-python"])
	}
	if n := len(jobs["gitlab-python"]); n != 1 {
		t.Fatalf("gitlab-python recipe has %d script commands %q; want 1", n, jobs["gitlab-python"])
	}
	for job, cmds := range jobs {
		block := recipe(t, doc, job)
		_, subject, ok := strings.Cut(block, "SUBJECT: ")
		subject, _, _ = strings.Cut(subject, "\n")
		if !ok || !strings.HasPrefix(subject, "exec:python3 tests/retrylab_client.py") {
			t.Fatalf("%s: SUBJECT %q; want exec:python3 tests/retrylab_client.py", job, subject)
		}
		for _, mistake := range []string{"", " --mistake retry-4xx"} {
			want := exitOK
			if mistake != "" {
				want = exitFailed
			}
			t.Run(job+"/"+strings.TrimSpace(strings.ReplaceAll(mistake, "--mistake ", "")), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "tests/retrylab_client.py"), client, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(repo, filepath.Join(dir, ".retrylab")); err != nil { // GitHub's checkout path
					t.Fatal(err)
				}
				summary := filepath.Join(dir, "summary.md")
				for i, c := range cmds {
					sh := exec.Command("bash", "-e", "-c", c)
					sh.Dir = dir
					sh.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
						"SUBJECT="+subject+mistake, "RETRYLAB_SRC="+repo, "GITHUB_STEP_SUMMARY="+summary)
					out, err := sh.CombinedOutput()
					code := sh.ProcessState.ExitCode()
					if i == 0 && code != want {
						t.Fatalf("%s: exit %d (%v); want %d\n%s", c, code, err, want, out)
					}
					if i > 0 && code != 0 {
						t.Errorf("%s: exit %d; want 0 (it runs always)\n%s", c, code, out)
					}
				}
				for _, sc := range []string{"outage", "not-found"} {
					junit, err := os.ReadFile(filepath.Join(dir, "out", sc+".xml"))
					if err != nil {
						t.Errorf("out/%s.xml: %v; the publishing steps need it", sc, err)
						continue
					}
					failed := strings.Contains(string(junit), "<failure")
					if wantFail := want == exitFailed && sc == "not-found"; failed != wantFail {
						t.Errorf("out/%s.xml has a failure: %v; want %v\n%s", sc, failed, wantFail, junit)
					}
					if failed && !strings.Contains(string(junit), "non-retryable") {
						t.Errorf("out/%s.xml does not name the failed check non-retryable:\n%s", sc, junit)
					}
				}
				if job == "github-python" {
					s, err := os.ReadFile(summary)
					if err != nil || strings.Count(string(s), "retrylab") < 2 {
						t.Errorf("step summary %q, %v; want both Markdown verdicts", s, err)
					}
				}
			})
		}
	}
	for _, job := range []string{"github-python", "gitlab-python"} {
		block := recipe(t, doc, job)
		if strings.Contains(block, "go install") || !strings.Contains(block, "go build -o") || !strings.Contains(block, "./cmd/retrylab") || !strings.Contains(block, "RETRYLAB_REF") {
			t.Errorf("the %s recipe does not build ./cmd/retrylab from a checkout at $RETRYLAB_REF:\n%s", job, block)
		}
	}
}
