// Package doccheck helps tests that regenerate a document in memory and
// compare it with the copy in the tree.
package doccheck

import (
	"fmt"
	"strings"
)

// FirstDiff describes the first line where have (the file in the tree)
// and want (what the runs give) differ, 1-based, or "" when they are equal.
func FirstDiff(have, want string) string {
	a, b := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y || i >= len(a) || i >= len(b) {
			return fmt.Sprintf("line %d is\n\t%q\nthe runs give\n\t%q", i+1, x, y)
		}
	}
	return ""
}
