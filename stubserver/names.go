package stubserver

import "slices"

// The values each enumerated field of a Config accepts, in the order
// Validate lists them; "" also means the field's default. A loader takes
// its choices from here rather than listing them again. Each call returns
// a fresh slice.

func HeaderNames() []string     { return slices.Clone(headerNames) }
func AlgorithmNames() []string  { return slices.Clone(algorithmNames) }
func ModeNames() []string       { return slices.Clone(modeNames) }
func OnErrorNames() []string    { return slices.Clone(onErrorNames) }
func KeyNames() []string        { return slices.Clone(keyNames) }
func FaultNames() []string      { return slices.Clone(faultNames) }
func FormNames() []string       { return slices.Clone(formNames) }
func DistNames() []string       { return slices.Clone(distNames) }
func DisciplineNames() []string { return slices.Clone(disciplines) }
