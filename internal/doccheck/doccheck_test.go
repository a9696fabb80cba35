package doccheck

import (
	"strings"
	"testing"
)

func TestFirstDiff(t *testing.T) {
	for _, tt := range []struct{ have, want, diff string }{
		{"a\nb\n", "a\nb\n", ""},
		{"a\nb\n", "a\nc\n", `line 2 is` + "\n\t\"b\"\nthe runs give\n\t\"c\""},
		{"a\n", "a\nb\n", `line 2 is`},
		{"a\nb\n", "a\n", `line 2 is`},
	} {
		got := FirstDiff(tt.have, tt.want)
		if (tt.diff == "") != (got == "") || !strings.HasPrefix(got, tt.diff) {
			t.Errorf("FirstDiff(%q, %q) = %q; want %q", tt.have, tt.want, got, tt.diff)
		}
	}
}
