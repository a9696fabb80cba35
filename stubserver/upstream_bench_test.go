package stubserver

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
)

// BenchmarkProxy is the CPU the stub spends per proxied request (an ok
// phase with an upstream, recording on, to a file) as a ratio to a bare
// httputil.ReverseProxy (Rewrite with SetURL and SetXForwarded, the same
// transport) in front of the same upstream, measured in the same run over
// loopback: 64 keep-alive connections per server and rounds alternating
// direct (the loader and the upstream alone), bare and stub. The process
// CPU of a round counts the loader, the proxy and the upstream; the direct
// round's is subtracted, so proxy-cpu-ratio compares the two proxies' own
// CPU per request (stub / bare).
func BenchmarkProxy(b *testing.B) {
	const conns, perRound, rounds = 64, 2000, 20
	upBody := []byte("ok\n")
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = contentTypeText
		w.Write(upBody)
	}), ReadHeaderTimeout: ReadHeaderTimeout, MaxHeaderBytes: MaxHeaderBytes, IdleTimeout: IdleTimeout}
	upAddr := serveOn(b, up.Serve, func() { up.Close() })
	target, _ := url.Parse("http://" + upAddr)

	ref := newProxy(target, nil, func(string, ...any) {}) // the stub's transport settings
	bareRP := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		Transport: ref.tr,
	}
	bare := &http.Server{Handler: bareRP, ReadHeaderTimeout: ReadHeaderTimeout, MaxHeaderBytes: MaxHeaderBytes, IdleTimeout: IdleTimeout}
	bareAddr := serveOn(b, bare.Serve, func() { bare.Close() })
	s, stopStub := benchStub(b, Config{Upstream: target.String()}, b.TempDir())
	stubAddr := serveOn(b, s.Serve, stopStub)

	direct, bareLoad, stubLoad := newLoader(b, upAddr, conns), newLoader(b, bareAddr, conns), newLoader(b, stubAddr, conns)
	for _, l := range []*loader{direct, bareLoad, stubLoad} {
		l.run(b, perRound) // warm up: connections to the upstream dialed
	}
	var cDirect, cBare, cStub, rBare, rStub []float64
	round := func(l *loader, rates, cpus *[]float64) {
		c0 := processCPU()
		r := l.run(b, perRound)
		if rates != nil {
			*rates = append(*rates, r)
		}
		*cpus = append(*cpus, float64(processCPU()-c0)/perRound)
	}
	b.ResetTimer()
	for range b.N {
		for range rounds {
			round(direct, nil, &cDirect)
			round(bareLoad, &rBare, &cBare)
			round(stubLoad, &rStub, &cStub)
		}
	}
	b.StopTimer()
	cd, cb, cs := median(cDirect), median(cBare), median(cStub)
	b.ReportMetric(median(rBare), "bare-req/s")
	b.ReportMetric(median(rStub), "stub-req/s")
	b.ReportMetric(cd, "direct-cpu-ns/req")
	b.ReportMetric(cb, "bare-cpu-ns/req")
	b.ReportMetric(cs, "stub-cpu-ns/req")
	b.ReportMetric((cs-cd)/(cb-cd), "proxy-cpu-ratio")
}
