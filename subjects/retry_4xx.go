package subjects

// retry-4xx is a negative control whose one mistake is retrying statuses
// that will never succeed: 400, 401, 403, 404 and 422 are retried like
// 429/5xx (the non-retryable check). Everything else is correct.
func init() {
	registerControl(&control{
		name:     "retry-4xx",
		mistake:  "retries 400, 401, 403, 404 and 422 as well as 429/5xx",
		retry4xx: true,
	})
}
