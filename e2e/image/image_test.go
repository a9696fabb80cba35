// Package image builds the repository's Dockerfile into an image, offline,
// with buildah, and runs the CLI inside it.
package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildah runs buildah with storage of its own under dir (vfs, chroot
// isolation: no daemon, no privileges beyond the test's).
func buildah(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	base := []string{"--storage-driver", "vfs", "--root", filepath.Join(root, "storage"), "--runroot", filepath.Join(root, "run")}
	cmd := exec.Command("buildah", append(base, args...)...)
	cmd.Env = append(os.Environ(), "BUILDAH_ISOLATION=chroot")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDockerfileBuildsAStaticImage builds the Dockerfile's final stage
// (FROM scratch) with the build stage replaced by a static binary built
// here (the golang image cannot be pulled offline), then runs the image's
// entrypoint: the binary must run alone, without libc or a shell.
func TestDockerfileBuildsAStaticImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a static binary and an image: make check")
	}
	if _, err := exec.LookPath("buildah"); err != nil {
		t.Skip("buildah not found (Debian package buildah; .ci/run installs it): the image is not built")
	}
	root := t.TempDir()
	// Can this machine build and run a container at all? A trivial image
	// first, so that a sandbox without the kernel features buildah needs
	// skips instead of blaming the Dockerfile.
	if out, err := buildah(t, root, "from", "--name", "probe", "scratch"); err != nil {
		t.Skipf("buildah cannot make a container here: %v\n%s", err, out)
	}
	buildah(t, root, "rm", "probe")

	ctx := filepath.Join(root, "build")
	for _, d := range []string{"out", "etc/ssl/certs"} {
		if err := os.MkdirAll(filepath.Join(ctx, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gobuild := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(ctx, "out", "retrylab"), "./cmd/retrylab")
	gobuild.Dir = "../.."
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(ctx, "etc/ssl/certs/ca-certificates.crt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	if out, err := buildah(t, root, "bud", "--build-context", "build="+ctx, "-f", "../../Dockerfile", "-t", "retrylab:test", empty); err != nil {
		t.Fatalf("buildah bud Dockerfile: %v\n%s", err, out)
	}
	if out, err := buildah(t, root, "from", "--name", "rl", "localhost/retrylab:test"); err != nil {
		t.Fatalf("buildah from: %v\n%s", err, out)
	}
	defer buildah(t, root, "rm", "rl")
	cfg, err := buildah(t, root, "inspect", "--format", "{{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.User}}", "localhost/retrylab:test")
	if err != nil || !strings.Contains(cfg, "[/retrylab] 65532:65532") {
		t.Errorf("image entrypoint and user = %q (%v); want [/retrylab] 65532:65532", cfg, err)
	}
	for _, args := range [][]string{{"version"}, {"scenarios"}} {
		out, err := buildah(t, root, append([]string{"run", "rl", "/retrylab"}, args...)...)
		if err != nil {
			t.Errorf("retrylab %s in the image: %v\n%s", args[0], err, out)
		}
		if args[0] == "scenarios" && !strings.Contains(out, "outage-date") {
			t.Errorf("retrylab scenarios in the image printed %q; want the built-in scenarios", out)
		}
	}
}
