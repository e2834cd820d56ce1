package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ${VAR} references expand from the environment over the file's text, before it is
// parsed, so that a reference may stand anywhere a value may. A reference to a variable
// that is not set stays as written; once the file is parsed, it is reported at the
// field that holds it, beside the file's other problems, rather than alone.

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// unsetRef is a reference to a variable that is not set, on a line of the expanded text.
type unsetRef struct {
	name string
	line int
}

// expandEnv replaces every ${VAR} of data whose variable lookup finds; it returns the text
// and the references left as written.
func expandEnv(data []byte, lookup func(string) (string, bool)) (string, []unsetRef) {
	var b strings.Builder
	var unset []unsetRef
	text := string(data)
	line, last := 1, 0
	for _, m := range envRef.FindAllStringSubmatchIndex(text, -1) {
		b.WriteString(text[last:m[0]])
		line += strings.Count(text[last:m[0]], "\n")
		name := text[m[2]:m[3]]
		v, ok := lookup(name)
		if !ok {
			unset = append(unset, unsetRef{name, line})
			v = text[m[0]:m[1]]
		}
		b.WriteString(v)
		line += strings.Count(v, "\n")
		last = m[1]
	}
	b.WriteString(text[last:])
	return b.String(), unset
}

// unsetVars reports each value of the tree n that holds a reference to an unset variable,
// at its field path. A reference in a comment is no value, and needs no variable.
func (p *problems) unsetVars(n *yaml.Node, path string, unset []unsetRef) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			p.unsetVars(c, path, unset)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p.unsetVars(k, join(path, k.Value), unset)
			p.unsetVars(n.Content[i+1], join(path, k.Value), unset)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			p.unsetVars(e, fmt.Sprintf("%s[%d]", path, i), unset)
		}
	case yaml.ScalarNode:
		seen := map[string]bool{}
		for _, m := range envRef.FindAllStringSubmatch(n.Value, -1) {
			if !seen[m[1]] && slices.ContainsFunc(unset, func(u unsetRef) bool { return u.name == m[1] }) {
				p.add(path, "environment variable %s is not set (line %d)", m[1], n.Line)
			}
			seen[m[1]] = true
		}
	}
}

// unsetByLine reports the unset references by line alone, for a file that does not parse.
func (p *problems) unsetByLine(unset []unsetRef) {
	for _, u := range unset {
		p.add(fmt.Sprintf("line %d", u.line), "environment variable %s is not set", u.name)
	}
}
