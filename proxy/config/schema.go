package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The shape check: before a file is decoded, its YAML tree is walked against the types of
// Config, so that a value of the wrong kind or an unknown field is reported with its field
// path (models[0].upstreams) and what is expected there, every one of them at once, rather
// than as the decoder's Go type names and lines.

var (
	durationType      = reflect.TypeFor[Duration]()
	modelUpstreamType = reflect.TypeFor[ModelUpstream]()
)

// shape checks the value n of the field at path against t.
func (p *problems) shape(n *yaml.Node, path string, t reflect.Type) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // an empty value leaves the zero value
	}
	switch {
	case t == durationType:
		if _, err := time.ParseDuration(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			p.add(path, "expected a duration such as 30s, 5m or 720h, not %s (line %d)", describe(n), n.Line)
		}
		return
	case t == modelUpstreamType && n.Kind == yaml.ScalarNode:
		return // a deployment's name alone
	case t == usdType:
		if _, err := parseUSD(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			p.add(path, "expected an amount in USD such as 2.50 (at most 12 decimals), not %s (line %d)", describe(n), n.Line)
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		p.shape(n, path, t.Elem())
	case reflect.Struct:
		p.mapping(n, path, t)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			p.add(path, "expected a mapping, not %s (line %d)", describe(n), n.Line)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p.shape(n.Content[i+1], join(path, n.Content[i].Value), t.Elem())
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			p.add(path, "expected a list such as [a, b], not %s (line %d)", describe(n), n.Line)
			return
		}
		for i, e := range n.Content {
			p.shape(e, fmt.Sprintf("%s[%d]", path, i), t.Elem())
		}
	default:
		p.scalar(n, path, t.Kind())
	}
}

// mapping checks a struct's mapping: known keys, and each value's shape.
func (p *problems) mapping(n *yaml.Node, path string, t reflect.Type) {
	if n.Kind != yaml.MappingNode {
		p.add(path, "expected a mapping of %s, not %s (line %d)", strings.Join(yamlFields(t), ", "), describe(n), n.Line)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := fieldByTag(t, k.Value)
		if !ok {
			p.add(join(path, k.Value), "unknown field (line %d); known fields here: %s", k.Line, strings.Join(yamlFields(t), ", "))
			continue
		}
		p.shape(v, join(path, k.Value), f.Type)
	}
}

// scalar checks a string, integer, number or boolean value.
func (p *problems) scalar(n *yaml.Node, path string, k reflect.Kind) {
	tag := n.ShortTag()
	switch {
	case k == reflect.String && n.Kind != yaml.ScalarNode:
		p.add(path, "expected a string, not %s (line %d)", describe(n), n.Line)
	case k == reflect.Bool && tag != "!!bool":
		p.add(path, "expected true or false, not %s (line %d)", describe(n), n.Line)
	case (k == reflect.Int || k == reflect.Int64) && tag != "!!int":
		p.add(path, "expected an integer, not %s (line %d)", describe(n), n.Line)
	case k == reflect.Float64 && tag != "!!float" && tag != "!!int":
		p.add(path, "expected a number such as 1.25, not %s (line %d)", describe(n), n.Line)
	}
}

// describe names what a node is, for an error: a mapping, a list, or the scalar as written.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlFields(t reflect.Type) []string {
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if n := yamlName(t.Field(i)); n != "" && n != "-" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}
