package subjects

// no-pacing is a negative control whose one mistake is not pacing itself:
// it ignores the policy's rate (Policy.Rate, Burst) that keeps it under the
// provider's published quota — it has no token bucket, and like every
// control it reads no rate-limit headers — so it lives on 429s instead (the
// pacing check). It honours the Retry-After of each 429 and is otherwise
// the correct loop.
func init() {
	registerControl(&control{
		name:     "no-pacing",
		mistake:  "ignores the quota: no token bucket for the policy's rate, rate-limit headers unread",
		noPacing: true,
	})
}
