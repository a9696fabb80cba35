package stubserver

import "slices"

// The values each enumerated field of a Config accepts, in the order
// Validate lists them ("" also means the field's default): a loader takes
// its choices from here rather than listing them again. Each call returns
// a fresh slice.

// AlgorithmNames lists Limit.Algorithm's values.
func AlgorithmNames() []string { return slices.Clone(algorithmNames) }

// ModeNames lists Limit.Mode's values.
func ModeNames() []string { return slices.Clone(modeNames) }

// OnErrorNames lists Quota.OnError's values.
func OnErrorNames() []string { return slices.Clone(onErrorNames) }

// KeyNames lists Limit.Key's values.
func KeyNames() []string { return slices.Clone(keyNames) }

// FaultNames lists Respond.Fault's values (and a mix's faults).
func FaultNames() []string { return slices.Clone(faultNames) }

// FormNames lists RetryAfter.Form's values: HTTP's Retry-After forms,
// then gRPC's waits (which need ProtocolGRPC).
func FormNames() []string { return append(slices.Clone(formNames), grpcFormNames[1:]...) }

// ProtocolNames lists Config.Protocol's values.
func ProtocolNames() []string { return slices.Clone(protocolNames) }

// DistNames lists Capacity.Dist's values.
func DistNames() []string { return slices.Clone(distNames) }

// DisciplineNames lists Capacity.Discipline's values.
func DisciplineNames() []string { return slices.Clone(disciplines) }
