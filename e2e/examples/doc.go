// Package examples holds no code: its test builds retrylab and runs each
// example's own tests under examples/ (pytest, node --test, the shell
// script), so the code users copy keeps doing what examples/README.md
// says: the good retry policy passes and each common mistake fails the
// check that names it.
package examples
