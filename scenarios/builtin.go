package scenarios

import (
	"embed"
	"errors"
	"fmt"
	"github.com/retrylab/retrylab/stubserver"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

//go:embed builtin/*.yaml
var builtinFS embed.FS

// ErrUnknownScenario is returned (wrapped) by Builtin and Resolve when no
// built-in scenario or file has the name.
var ErrUnknownScenario = errors.New("unknown scenario")

// BuiltinNames lists the built-in scenarios, sorted.
func BuiltinNames() []string {
	entries, _ := fs.ReadDir(builtinFS, "builtin")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}

// BuiltinNamesOf lists the built-in scenarios whose stub speaks protocol
// (server.protocol; "http" for the default), sorted: the HTTP ones are
// judged with HTTP subjects, the gRPC ones with gRPC subjects.
func BuiltinNamesOf(protocol string) []string {
	var names []string
	for _, sc := range Builtins() {
		p := sc.Server.Protocol
		if p == "" {
			p = stubserver.ProtocolHTTP
		}
		if p == protocol {
			names = append(names, sc.Name)
		}
	}
	return names
}

// Builtin returns a fresh copy of the named built-in scenario; its File is
// "builtin/NAME.yaml".
func Builtin(name string) (*Scenario, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("scenarios: %w %q (built-ins: %s)", ErrUnknownScenario, name, strings.Join(BuiltinNames(), ", "))
	}
	file := path.Join("builtin", name+".yaml")
	data, err := builtinFS.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w %q (built-ins: %s)", ErrUnknownScenario, name, strings.Join(BuiltinNames(), ", "))
	}
	return Parse(file, data)
}

// Builtins returns a fresh copy of every built-in scenario, sorted by name.
func Builtins() []*Scenario {
	var out []*Scenario
	for _, name := range BuiltinNames() {
		sc, err := Builtin(name)
		if err != nil {
			panic(err) // the embedded files are tested; this cannot happen
		}
		out = append(out, sc)
	}
	return out
}

// Resolve returns the scenario a user named on a command line: a file path
// (anything with a path separator or a .yaml/.yml suffix, or an existing
// file) or a built-in name. A built-in wins over a file of the same bare
// name; write ./NAME to mean the file.
func Resolve(nameOrPath string) (*Scenario, error) {
	looksLikePath := strings.ContainsAny(nameOrPath, `/\`) ||
		strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml")
	if !looksLikePath {
		if sc, err := Builtin(nameOrPath); err == nil || !errors.Is(err, ErrUnknownScenario) {
			return sc, err
		}
		if _, err := os.Stat(nameOrPath); err != nil {
			return nil, fmt.Errorf("scenarios: %w %q: not a built-in (%s) nor a file", ErrUnknownScenario, nameOrPath, strings.Join(BuiltinNames(), ", "))
		}
	}
	sc, err := Load(nameOrPath)
	if err != nil && errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (%w)", err, ErrUnknownScenario)
	}
	return sc, err
}

// builtinSources returns the embedded files' bytes (fuzz seeds).
func builtinSources() [][]byte {
	var out [][]byte
	for _, name := range BuiltinNames() {
		b, _ := builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
		out = append(out, b)
	}
	return out
}
