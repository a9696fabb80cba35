package subjects

import (
	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// no-idempotency-key is a negative control whose one mistake is retrying
// non-idempotent requests (POST, PATCH) without an Idempotency-Key
// (clientcontrol.Variant.RetryWithoutKey): it neither adds one nor refuses
// to retry, so a write the server applied but whose answer was lost can be
// applied twice (the idempotency check). Everything else is the client's;
// requests that carry a key of their own keep it.
func init() {
	registerControl(&control{
		name:    "no-idempotency-key",
		mistake: "retries POST and PATCH without an Idempotency-Key",
		variant: func(client.Config) clientcontrol.Variant { return clientcontrol.Variant{RetryWithoutKey: true} },
	})
}
