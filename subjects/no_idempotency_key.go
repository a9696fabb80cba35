package subjects

// no-idempotency-key is a negative control whose one mistake is retrying
// non-idempotent requests (POST, PATCH) without an Idempotency-Key: it
// neither adds one nor refuses to retry, so a write the server applied but
// whose answer was lost can be applied twice (the idempotency check).
// Everything else is the correct loop's; requests that carry a key of their
// own keep it.
func init() {
	registerControl(&control{
		name:    "no-idempotency-key",
		mistake: "retries POST and PATCH without an Idempotency-Key",
		noKey:   true,
	})
}
