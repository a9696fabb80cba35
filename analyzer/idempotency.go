package analyzer

import (
	"fmt"
	"strings"

	"github.com/retrylab/retrylab/timeline"
)

// idempotency: a retry of a write (POST, PATCH) must carry the
// Idempotency-Key its first attempt carried, and a key names one write.
// The request's keys as the stub recorded them are in its keyState (idem,
// idemN); the check keeps the keys' owners.
type idemCheck struct {
	checkBase
	n     counter // retries of writes
	reuse counter // writes that carried a key
	// owners: the first write each key was sent for; unowned counts the
	// writes past maxIdemOwners, not compared.
	owners            map[string]idemOwner
	unowned           int64
	none, fresh, late int64 // retries without the key, with a fresh one, with one the first attempt lacked
}

func newIdem(b checkBase) checker { return &idemCheck{checkBase: b} }

func (ch *idemCheck) attempt(r *timeline.Attempt, _ ResponseClass, st *keyState) {
	if r.Method != "POST" && r.Method != "PATCH" {
		return
	}
	if r.IdemKey != "" && !st.idemOwned {
		st.idemOwned = true
		ch.owner(r)
	}
	if r.Attempt-st.base > 1 {
		ch.retried(st, r)
	}
}

func (ch *idemCheck) result() CheckResult {
	if ch.n.judged == 0 && ch.reuse.judged == 0 {
		return skip("no POST or PATCH request was retried or carried an Idempotency-Key")
	}
	why := fmt.Sprintf("%d of %d POST/PATCH retries without the write's Idempotency-Key (%d carried none, %d a fresh key per attempt, %d one their first attempt lacked); %d of %d writes with a key sent a key another write had sent",
		ch.n.bad, ch.n.judged, ch.none, ch.fresh, ch.late, ch.reuse.bad, ch.reuse.judged)
	if ch.unowned > 0 {
		why += fmt.Sprintf(" (%d writes past the first %d keys not compared)", ch.unowned, maxIdemOwners)
	}
	r := verdict(ch.cfg, float64(ch.n.bad+ch.reuse.bad), ch.cfg.def.Threshold.Num, ch.n.judged+ch.reuse.judged, why)
	r.Examples = append(append([]Example(nil), ch.reuse.ex...), ch.n.ex...)
	if len(r.Examples) > ch.a.maxEx {
		r.Examples = r.Examples[:ch.a.maxEx]
	}
	return r
}

// maxIdemOwners bounds the Idempotency-Keys kept to find one sent for two
// writes; past it, further writes' keys are not compared (said in the
// check's reason).
const maxIdemOwners = 1 << 18

// idemOwner is the first write an Idempotency-Key was sent for.
type idemOwner struct{ client, key, path string }

// idempotencyOwner checks write r's key against every other write's: a
// key names one write. A provider that honours keys answers a second
// write sent with the first one's key with the first one's stored
// response, and the second write is lost (across clients too: a key
// that is not unique per write).
func (ch *idemCheck) owner(r *timeline.Attempt) {
	ch.reuse.judged++
	if ch.owners == nil {
		ch.owners = make(map[string]idemOwner)
	}
	o, ok := ch.owners[r.IdemKey]
	if !ok {
		if len(ch.owners) < maxIdemOwners {
			ch.owners[strings.Clone(r.IdemKey)] = idemOwner{client: strings.Clone(r.Client), key: strings.Clone(r.Key), path: strings.Clone(r.Path)}
		} else {
			ch.unowned++
		}
		return
	}
	if o.client == r.Client && o.key == r.Key {
		return // the same write, its key reused after a success
	}
	if ch.reuse.hit(ch.a.maxEx) {
		ch.reuse.ex = append(ch.reuse.ex, Example{Client: strings.Clone(r.Client), Key: strings.Clone(r.Key), Attempt: r.Attempt, At: r.At,
			Detail: fmt.Sprintf("key digest %s was sent for %s %s and %s %s: a provider that honours keys answers the second with the first's stored response, and the second write is lost", r.IdemKey, r.Method, o.path, r.Method, r.Path)})
	}
}

// idempotencyRetry judges retry r of a non-idempotent logical request:
// it must carry the Idempotency-Key its first attempt carried. A retry
// without one, with a different one (a fresh key per attempt lets the
// server run the write twice), or with one its first attempt lacked (the
// server never saw the key of the write it would have to deduplicate)
// offends. Timelines that record only that a key was present (no
// idem_key) are judged on presence alone.
func (ch *idemCheck) retried(st *keyState, r *timeline.Attempt) {
	ch.n.judged++
	var why string
	switch {
	case !r.Idempotent && r.IdemKey == "":
		ch.none++
		why = "without an Idempotency-Key"
	case r.IdemKey == "" || st.idemN == 0 || st.idemN == int32(r.Attempt):
		return // presence alone known, or no earlier attempt seen to compare
	case st.idem == "":
		ch.late++
		why = fmt.Sprintf("with an Idempotency-Key its attempt %d did not carry (the server cannot deduplicate a write it saw without a key)", st.idemN)
	case st.idem != r.IdemKey:
		ch.fresh++
		why = fmt.Sprintf("with a different Idempotency-Key from its attempt %d (digest %s, then %s): a fresh key per attempt lets the server run the write twice", st.idemN, st.idem, r.IdemKey)
	default:
		return
	}
	if ch.n.hit(ch.a.maxEx) {
		ch.n.ex = append(ch.n.ex, Example{Client: strings.Clone(r.Client), Key: strings.Clone(r.Key), Attempt: r.Attempt, At: r.At,
			Detail: fmt.Sprintf("%s %s retried (attempt %d at %s) %s", r.Method, r.Path, r.Attempt, fmtNS(r.At), why)})
	}
}
