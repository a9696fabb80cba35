// Package deps pins the project's third-party modules in go.mod until the
// packages that import them land. It is never imported.
package deps

import (
	_ "github.com/avast/retry-go/v4"
	_ "github.com/cenkalti/backoff/v5"
	_ "github.com/failsafe-go/failsafe-go"
	_ "github.com/failsafe-go/failsafe-go/failsafehttp"
	_ "github.com/failsafe-go/failsafe-go/retrypolicy"
	_ "github.com/go-resty/resty/v2"
	_ "github.com/goccy/go-yaml"
	_ "github.com/hashicorp/go-retryablehttp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/sethvargo/go-retry"
	_ "github.com/spf13/pflag"
	_ "github.com/vbauerster/mpb/v8"
	_ "github.com/vbauerster/mpb/v8/decor"
	_ "golang.org/x/time/rate"
	_ "gonum.org/v1/plot"
	_ "gonum.org/v1/plot/cmpimg"
	_ "gonum.org/v1/plot/plotter"
	_ "gonum.org/v1/plot/vg"
	_ "gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg"
	_ "gonum.org/v1/plot/vg/vgsvg"
)
