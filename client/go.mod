module github.com/retrylab/retrylab/client

go 1.25.0

require golang.org/x/time v0.15.0
