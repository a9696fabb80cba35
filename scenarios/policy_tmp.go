package scenarios

import "time"

// subjectPolicy stands in for subjects.Policy until the subjects package lands.
type subjectPolicy = struct {
	Base, Cap   time.Duration
	MaxAttempts int
	Budget      time.Duration
	Jitter      string
	Rate        float64
	Burst       int
	Timeout     time.Duration
}
