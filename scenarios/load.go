package scenarios

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/retrylab/retrylab/stubserver"
)

// MaxFileSize is the largest scenario file Load and Parse accept.
const MaxFileSize = 1 << 20

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	methodRE = regexp.MustCompile(`^[A-Z]+$`)
	// keyPrefixRE: an API key prefix, in the characters of a Bearer token.
	keyPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._~+/-]{1,64}$`)
)

// Load reads and parses the scenario file at path. Problems are reported as
// "path:line:col: key: message" (a *SyntaxError, or several joined).
func Load(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("scenarios: reading %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse parses a scenario file's contents; file names it in errors. The
// returned Scenario has every default filled in (see the Default
// constants), its server section has passed stubserver.Config.Validate,
// and Source holds data.
//
// Parsing is strict: unknown keys, values of the wrong type, bad durations
// and rates, and impossible values (negative durations, a quota phase
// without a quota, ...) are errors naming file:line:col. Up to ten problems
// are reported, in file order.
//
// The keys, their kinds and defaults are the tables below (scenarioKeys
// and the ones it holds; docs/scenarios.md describes them); a key left
// out or empty takes its default: the Default constants, the stub's own
// (stubserver), the subject's and the analyzer's.
// Anchors, aliases and merge keys (<<: *base, <<: [*a, *b]) work as in
// YAML: a mapping's own keys win over merged ones, earlier sources over
// later ones.
func Parse(file string, data []byte) (sc *Scenario, err error) {
	d, root, err := parseRoot(file, data)
	if err != nil {
		return nil, err
	}
	sc = &Scenario{Source: data, File: file, Duration: DefaultDuration, Subject: SubjectSpec{Name: DefaultSubject},
		Fleet: Fleet{Clients: DefaultClients, Start: Arrival{Kind: ArrivalBurst}, Requests: DefaultRequests,
			Method: DefaultMethod, Timeout: DefaultTimeout}}
	scenarioKeys.decode(d, root, "", sc)

	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".yaml"), ".yml")
	}
	if !nameRE.MatchString(sc.Name) {
		d.failAt(d.places["name"], "name", "%q is not a usable name (letters, digits, '.', '_', '-')", sc.Name)
	}
	if !d.failed() {
		d.validateServer(sc.Server)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return sc, nil
}

// ParseServer parses only the server section of a scenario file (what
// `retrylab serve` needs); the other top-level keys must be known but are
// not read. The Config has passed Validate.
func ParseServer(file string, data []byte) (stubserver.Config, error) {
	d, root, err := parseRoot(file, data)
	if err != nil {
		return stubserver.Config{}, err
	}
	var cfg stubserver.Config
	m := d.mapping(root, "")
	for _, k := range scenarioKeys.names() {
		if k != "server" {
			m.take(k)
		}
	}
	n, path := m.take("server")
	serverKeys.decode(d, n, path, &cfg)
	m.done()
	if !d.failed() {
		d.validateServer(cfg)
	}
	if err := d.err(); err != nil {
		return stubserver.Config{}, err
	}
	return cfg, nil
}

// parseRoot parses YAML into its one document's body.
func parseRoot(file string, data []byte) (d *decoder, root ast.Node, err error) {
	if len(data) > MaxFileSize {
		return nil, nil, &SyntaxError{File: file, Msg: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}
	}
	if !utf8.Valid(data) {
		return nil, nil, &SyntaxError{File: file, Msg: "file is not valid UTF-8"}
	}
	defer func() {
		// The YAML parser is third-party code fed outside input: a panic
		// in it is a bad file, not a crash.
		if r := recover(); r != nil {
			d, root, err = nil, nil, &SyntaxError{File: file, Msg: fmt.Sprintf("yaml: cannot parse: %v", r)}
		}
	}()
	f, perr := parser.ParseBytes(data, 0)
	if perr != nil {
		e := &SyntaxError{File: file, Msg: perr.Error()}
		var ye yaml.Error
		if errors.As(perr, &ye) {
			e.Msg = ye.GetMessage()
			if t := ye.GetToken(); t != nil && t.Position != nil {
				e.Line, e.Col = t.Position.Line, t.Position.Column
			}
		}
		return nil, nil, e
	}
	d = newDecoder(file)
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, nil, &SyntaxError{File: file, Msg: "empty scenario"}
	case len(docs) > 1:
		p := position(docs[1].Body)
		e := &SyntaxError{File: file, Msg: "a scenario file holds one YAML document"}
		if p != nil {
			e.Line, e.Col = p.Line, p.Column
		}
		return nil, nil, e
	}
	root = docs[0].Body
	d.collectAnchors(root)
	return d, root, nil
}

// validateServer runs the stub's own validation and places each of its
// field errors (`phases[1].retry_after.form: ...`) on the node the field
// names, or on the nearest enclosing node that is in the file.
func (d *decoder) validateServer(cfg stubserver.Config) {
	err := cfg.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *stubserver.FieldError
		if !errors.As(e, &fe) {
			d.failAt(d.places["server"], "server", "%v", e)
			continue
		}
		field := fe.Field
		if d.singleQuota {
			// quota: {rate: ...} is the one limit's own mapping.
			field = strings.Replace(field, "quota.limits[0].", "quota.", 1)
		}
		path := "server." + field
		place := path
		for d.places[place] == nil && place != "server" {
			if i := strings.LastIndexAny(place, ".["); i > 0 {
				place = place[:i]
			} else {
				place = "server"
			}
		}
		d.failAt(d.places[place], path, "%s", fe.Msg)
	}
}
