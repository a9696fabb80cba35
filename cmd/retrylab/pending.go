package main

import (
	"context"
	"errors"
)

// Placeholders until the runner lands (replaced in this session).
func cmdRun(ctx context.Context, e *env, args []string) error {
	return errors.New("run: not built yet")
}

func cmdCompare(ctx context.Context, e *env, args []string) error {
	return errors.New("compare: not built yet")
}
