//go:build unix

package reports

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The browser test opens report.html in headless Chromium from disk. It
// needs the `chromium` binary (Debian package chromium); without it the test
// skips locally and fails when CI=true. $RETRYLAB_CHROMIUM names another
// binary. Screenshots go to $RETRYLAB_ARTIFACTS/reports (default: a
// temporary directory).

func findChromium(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	if env := os.Getenv("RETRYLAB_CHROMIUM"); env != "" {
		names = []string{env}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("chromium not found (looked for %v); CI must install it (apt-get install -y chromium)", names)
	}
	t.Skipf("chromium not found (looked for %v); install it to run the browser test", names)
	return ""
}

// chromium runs the browser headless on one page with the network cut off
// (every host name resolves to nothing) and returns its standard output.
func chromium(t *testing.T, bin, page string, args ...string) []byte {
	t.Helper()
	profile, err := os.MkdirTemp("", "reports-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	// Chromium's helpers may still be writing the profile as it exits:
	// remove it best-effort.
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--user-data-dir=" + profile,
	}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+page)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, lastLines(stderr.String(), 20))
	}
	return stdout.Bytes()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// probe is a script added to a copy of the page: once the page has loaded
// it writes onto <body> how many images there are, which are broken, which
// resources the page fetched that are not embedded, whether the page is
// wider than the window, and whether the verdict table is there.
const probe = `<script>
window.addEventListener("load", function () {
  var im = document.images, broken = [];
  for (var i = 0; i < im.length; i++) {
    if (!im[i].complete || im[i].naturalWidth === 0) broken.push(im[i].alt || im[i].src.slice(0, 40));
  }
  var fetched = performance.getEntriesByType("resource").map(function (e) { return e.name; })
    .filter(function (n) { return n.indexOf("data:") !== 0; });
  var b = document.body;
  b.setAttribute("data-probe-images", String(im.length));
  b.setAttribute("data-probe-broken", broken.join("|"));
  b.setAttribute("data-probe-fetched", fetched.join(" "));
  b.setAttribute("data-probe-overflow", String(document.documentElement.scrollWidth > window.innerWidth + 1));
  b.setAttribute("data-probe-verdict", String(!!document.querySelector("#verdict-table tbody tr")));
  b.setAttribute("data-probe-done", "yes");
});
</script>`

type probeResult struct {
	images   int
	broken   string
	fetched  string
	overflow bool
	verdict  bool
}

var probeAttr = regexp.MustCompile(`data-probe-([a-z]+)="([^"]*)"`)

// probePage copies page beside itself with the probe, loads it at the given
// window size and reads the probe's findings from the DOM.
func probePage(t *testing.T, bin, page string, width, height int) probeResult {
	t.Helper()
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(html, []byte("</body>"))
	if i < 0 {
		t.Fatalf("%s has no </body>", page)
	}
	probed := filepath.Join(filepath.Dir(page), "probe-"+filepath.Base(page))
	out := append(append(append([]byte{}, html[:i]...), probe...), html[i:]...)
	if err := os.WriteFile(probed, out, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(probed)
	dom := chromium(t, bin, probed, "--virtual-time-budget=5000", fmt.Sprintf("--window-size=%d,%d", width, height), "--dump-dom")
	attrs := map[string]string{}
	for _, m := range probeAttr.FindAllSubmatch(dom, -1) {
		attrs[string(m[1])] = string(m[2])
	}
	if attrs["done"] != "yes" {
		t.Fatalf("the probe did not run in %s (DOM of %d bytes)", filepath.Base(page), len(dom))
	}
	n, _ := strconv.Atoi(attrs["images"])
	return probeResult{images: n, broken: attrs["broken"], fetched: attrs["fetched"], overflow: attrs["overflow"] == "true", verdict: attrs["verdict"] == "true"}
}

func TestReportInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser: make check")
	}
	bin := findChromium(t)
	rep := goldenReport(t)
	page, err := filepath.Abs(rep.HTML)
	if err != nil {
		t.Fatal(err)
	}
	artifacts := artifactDir(t)

	// A page that reaches for the network, to prove the probe sees it.
	control := filepath.Join(t.TempDir(), "control.html")
	os.WriteFile(control, []byte(`<!DOCTYPE html><html><head><link rel="stylesheet" href="http://fonts.example.com/a.css"></head>`+
		`<body><img src="https://example.com/x.png" alt="remote"></body></html>`), 0o644)

	var phone, controlResult probeResult
	// The three browser runs are independent: run them side by side.
	t.Run("browser", func(t *testing.T) {
		t.Run("phone", func(t *testing.T) {
			t.Parallel()
			phone = probePage(t, bin, page, 390, 844)
		})
		t.Run("control", func(t *testing.T) {
			t.Parallel()
			controlResult = probePage(t, bin, control, 800, 600)
		})
		t.Run("screenshot", func(t *testing.T) {
			t.Parallel()
			shot := filepath.Join(artifacts, "report-screenshot.png")
			chromium(t, bin, page, "--virtual-time-budget=2000", "--window-size=1280,4000", "--screenshot="+shot)
			if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
				t.Fatalf("no screenshot at %s (%v)", shot, err)
			}
			t.Logf("screenshot: %s", shot)
		})
	})
	if t.Failed() {
		return
	}

	if !phone.verdict {
		t.Errorf("the verdict table is missing or empty in the browser")
	}
	if want := len(rep.Plots); phone.images != want {
		t.Errorf("the browser saw %d images; want %d", phone.images, want)
	}
	if phone.broken != "" {
		t.Errorf("broken images: %s", phone.broken)
	}
	if phone.fetched != "" {
		t.Errorf("report.html fetched from the network: %s", phone.fetched)
	}
	if phone.overflow {
		t.Errorf("report.html is wider than a 390px phone screen")
	}
	if !strings.Contains(controlResult.fetched, "https://example.com/x.png") || !strings.Contains(controlResult.fetched, "http://fonts.example.com/a.css") || controlResult.broken != "remote" {
		t.Errorf("control page: fetched %q, broken %q; want both remote URLs seen and the remote image broken", controlResult.fetched, controlResult.broken)
	}
}
