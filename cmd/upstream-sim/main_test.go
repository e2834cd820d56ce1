package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestHelpDefaults: -help goes to stdout and shows each default as it is.
func TestHelpDefaults(t *testing.T) {
	var out, errOut bytes.Buffer
	_, err := parseArgs([]string{"-help"}, &out, &errOut)
	if !errors.Is(err, flag.ErrHelp) || errOut.Len() != 0 {
		t.Fatalf("err %v, stderr %q", err, errOut.String())
	}
	help := out.String()
	if !strings.Contains(help, "-record") || !strings.Contains(help, `(default "127.0.0.1:9090")`) {
		t.Fatalf("help:\n%s", help)
	}
	// Recording is off by default; a help line saying "(default true)" of a
	// "do not record" flag told the opposite of what -no-record could change.
	if strings.Contains(help, "(default true)") {
		t.Fatalf("help shows a true default:\n%s", help)
	}
	o, err := parseArgs(nil, &out, &errOut)
	if err != nil || o.record {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	if o, err := parseArgs([]string{"-no-record"}, &out, &errOut); err != nil || o.record {
		t.Fatalf("-no-record: %+v %v", o, err)
	}
	if _, err := parseArgs([]string{"stray"}, &out, &errOut); err == nil {
		t.Fatal("a stray argument is accepted")
	}
}
