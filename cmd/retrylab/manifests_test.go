package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestManifestsUseTheCLI keeps deploy/kubernetes true to the CLI: every
// container running the retrylab image names a command that exists, and
// every --flag it passes is one that command takes (e2e/k8sapi
// checks the manifests against the Kubernetes API types).
func TestManifestsUseTheCLI(t *testing.T) {
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests (%v)", err)
	}
	type container struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
	}
	type podSpec struct {
		InitContainers []container `yaml:"initContainers"`
		Containers     []container `yaml:"containers"`
	}
	type doc struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Template struct {
				Spec podSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	flagsOf := map[string]map[string]bool{}
	flagRE := regexp.MustCompile(`(?m)^\s+(?:-(\w), )?--([a-z-]+)`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			var d doc
			if err := yaml.Unmarshal([]byte(part), &d); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			spec := d.Spec.Template.Spec
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				if !strings.HasPrefix(c.Image, "retrylab:") {
					continue
				}
				where := filepath.Base(f) + " " + d.Metadata.Name + "/" + c.Name
				if len(c.Args) == 0 {
					t.Errorf("%s: no command", where)
					continue
				}
				name := c.Args[0]
				cmd, ok := commands[name]
				if !ok {
					t.Errorf("%s: retrylab has no command %q", where, name)
					continue
				}
				if flagsOf[name] == nil {
					var out bytes.Buffer
					cmd.run(context.Background(), &env{stdout: &out, stderr: &out}, []string{"--help"})
					flagsOf[name] = map[string]bool{}
					for _, m := range flagRE.FindAllStringSubmatch(out.String(), -1) {
						flagsOf[name]["--"+m[2]] = true
						if m[1] != "" {
							flagsOf[name]["-"+m[1]] = true
						}
					}
				}
				for _, a := range c.Args[1:] {
					if !strings.HasPrefix(a, "-") {
						continue
					}
					flag, _, _ := strings.Cut(a, "=")
					if !flagsOf[name][flag] {
						t.Errorf("%s: retrylab %s has no flag %s", where, name, flag)
					}
				}
				checked++
			}
		}
	}
	if checked < 4 {
		t.Errorf("checked %d retrylab containers; want the stub, the fleet, merge and analyze", checked)
	}
}
