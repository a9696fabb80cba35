package redistest

import "testing"

func TestStartAndStop(t *testing.T) {
	s := Start(t)
	if err := s.Ping(); err != nil {
		t.Fatalf("ping a started server: %v", err)
	}
	s.Stop()
	if err := s.Ping(); err == nil {
		t.Fatal("ping after Stop succeeded; want an error")
	}
	s.Stop() // again: no hang, no panic
}
