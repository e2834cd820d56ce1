package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Names of the files WriteAll writes besides the plots.
const (
	MarkdownFile = "report.md"
	JSONFile     = "results.json"
)

// WriteJSON writes every raw result of run, histograms included, as indented JSON.
func WriteJSON(w io.Writer, run *Run) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(run); err != nil {
		return fmt.Errorf("cannot encode results: %w", err)
	}
	return nil
}

// ReadJSON reads what WriteJSON wrote, so runs can be compared.
func ReadJSON(r io.Reader) (*Run, error) {
	var run Run
	if err := json.NewDecoder(r).Decode(&run); err != nil {
		return nil, fmt.Errorf("cannot decode results: %w", err)
	}
	return &run, nil
}

// WriteAll writes the plots, results.json and report.md (with the plots
// linked) into dir, creating it if needed.
func WriteAll(dir string, run *Run) error {
	if err := ensureDir(dir); err != nil {
		return err
	}
	plots, err := WritePlots(dir, run)
	if err != nil {
		return err
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, run); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, JSONFile), js.Bytes()); err != nil {
		return err
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, run, plots); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, MarkdownFile), md.Bytes())
}

func writeFile(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cannot write %q: %w", path, err)
	}
	return nil
}
