package configs

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML as a Go duration string
// ("30ms", "5s", "1m", "1h30m"). A bare integer is refused: a unit is always
// required, so "timeout: 30" can never silently mean 30 nanoseconds.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String renders the duration as Go does ("1m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a Go duration string. A bad value is a
// *yaml.TypeError ("line N: …"), which yaml.v3 collects and decodes on
// past, so `borda config check` reports it with the file's other problems.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a duration string such as \"5s\"", n.Line)}}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (use Go syntax: 30ms, 5s, 1m)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration back as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }
