package grpcsubjects_test

import (
	"context"
	"strings"

	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

func runnerRun(sc *scenarios.Scenario, subject string) (*runner.Summary, error) {
	s, err := subjects.Lookup(subject)
	if err != nil {
		return nil, err
	}
	return runner.Run(context.Background(), sc, runner.RunOptions{Subject: s, Virtual: true})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
