# retrylab — build, test, benchmark.
GO      ?= go
# The workspace's modules (go.work): the harness, the client library, its
# Prometheus adapter, its Redis-shared bucket and the gRPC reference
# interceptor. `./...` at the root does not
# descend into the nested modules, so each is listed; one go command sees them
# all through go.work.
MODULES ?= . ./client ./client/clientprom ./client/clientredis ./client/grpcretry
PKGS    ?= $(addsuffix /...,$(MODULES))

.PHONY: all build test check vet fmt-check race race-short matrix client-deps manifests examples bench fuzz run validation libraries clean

all: build test

build:
	$(GO) build -o bin/retrylab ./cmd/retrylab

## test: the suite to run before every commit, in at most 5 minutes on 2
## cores: formatting, vet, every package's tests under the race detector
## with -short (the fast tests of every package; what -short skips is
## listed in docs/testing.md) and the manifests.
test: fmt-check vet race-short manifests

## check: everything, what CI runs (.ci/run): `make test` without -short,
## then the validation matrix, the busy-host suite and the examples (a
## minute of real time in Python, Node and the shell). Run it before a
## change to a check, a scenario, the fleet or the stub is merged, and
## after a change to go.mod, the Dockerfile or the examples.
check: fmt-check vet race matrix examples manifests

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

race: client-deps
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## race-short: the race step of `make test`: -short skips the tests that
## build other modules or images, drive a browser, run fleets or Redis
## replicas in real time for seconds, or play many seeds.
race-short:
	$(GO) test -race -short -count=1 -timeout 10m $(PKGS)

## matrix: the tests about verdicts on many seeds, without the race
## detector (under it they skip, or run one seed and the cheap scenarios:
## the race step looks for races, and plays every built-in and every
## subject in tests of their own). The validation matrix and the library
## findings, every cell, compared with docs/validation.md,
## docs/retry-budgets.md and docs/libraries.md; the class tests (every
## built-in × our client and its control on seeds 1-20); the waves
## measurements and controls; the report against the verdict on every
## built-in; the noise class test (every built-in's good and bad policy
## judged under injected lateness, batches and starvation) and the power
## table. Then the real-time suites: the built-ins that judge time
## windows beside one CPU hog per core; our client cut at 20 random
## instants; 60 one-client Python processes with known policies.
matrix:
	$(GO) test -count=1 -run 'TestValidationMatrix|TestRetryBudgetLiterature|TestRetryBudgetScope|TestLibraries|TestGRPCLibraries|TestEveryBuiltin|TestWavesMeasurements|TestWavesLoadedHost|TestWavesControls|TestReportAgreesWithVerdictBuiltins|TestNoiseClass|TestNoisePower' \
	  ./e2e/validation ./e2e/findings ./retrylabtest ./analyzer ./subjects ./reports
	$(GO) test -count=1 -run TestBusyHost ./runner -args -busy
	$(GO) test -count=1 -run TestInterruptedNeverFails ./runner -args -interrupts 20
	$(GO) test -count=1 ./e2e/noise -args -exec-noise

## manifests: deploy/kubernetes decoded strictly against the official API
## types, in a module of its own (e2e/k8sapi, outside go.work) so that
## no other module requires Kubernetes' packages.
manifests:
	cd e2e/k8sapi && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 ./...

## examples: the examples' own tests (pytest, node --test, the curl script)
## against a freshly built retrylab, alone (under -race, e2e/examples runs
## nothing: the race detector adds nothing to programs in other languages,
## only load). A missing interpreter skips, or fails under CI=true.
examples:
	$(GO) test -count=1 ./e2e/examples

## client-deps: the client's and clientredis's own requirements (older than
## the workspace's) in the module cache: e2e/modules builds a module on
## each alone, offline.
client-deps:
	cd client && GOWORK=off $(GO) mod download
	@# clientredis requires the unreleased client: download through a copy of
	@# its go.mod that replaces it with the directory.
	tmp=$$(mktemp -d) && cp client/clientredis/go.mod client/clientredis/go.sum $$tmp/ && \
	  cd client/clientredis && $(GO) mod edit -modfile=$$tmp/go.mod -replace=github.com/retrylab/retrylab/client=../ && \
	  GOWORK=off $(GO) mod download -modfile=$$tmp/go.mod; rc=$$?; rm -rf $$tmp; exit $$rc

## bench: every benchmark once through; figures go to BENCHMARKS.md by hand.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m $(PKGS)

## fuzz: a short run of every fuzz target (FUZZTIME each).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## run: the main job on the built-in defaults.
run:
	$(GO) run ./cmd/retrylab run outage-date

## validation: every built-in scenario × retrylab and each negative control ×
## 3 seeds in virtual time; rewrites docs/validation.md (`make check` runs the
## same matrix and fails when the file is stale). Then the retry-budget
## literature table (sustained 503 shares × retrylab, no-retry-budget,
## no-retry); rewrites docs/retry-budgets.md (`make check` compares it too).
validation:
	$(GO) test ./e2e/validation -run TestValidationMatrix -count=1 -args -write-doc ../../docs/validation.md
	$(GO) test ./e2e/validation -run TestRetryBudgetLiterature -count=1 -args -write-budget-doc ../../docs/retry-budgets.md

## libraries: what retrylab finds in popular Go retry libraries; rewrites
## docs/libraries.md (`make check` compares it, except the figures of the
## libraries that draw from the global math/rand).
libraries:
	$(GO) test ./e2e/findings -run TestLibraries -count=1 -args -write-doc ../../docs/libraries.md

clean:
	rm -rf bin out
