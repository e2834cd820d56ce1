package proxy

import (
	"os"
	"syscall"
	"testing"
)

// TestFilesSpoolIsAnonymous checks that the spool file of an upload has no name from the
// start: it never appears in the temporary directory.
func TestFilesSpoolIsAnonymous(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	f, err := openSpool()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("spooled"); err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 0 {
		t.Fatalf("the spool file has %d names", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the temporary directory holds %v", entries)
	}
	if _, err := openAnonymous(dir); err != nil {
		t.Logf("O_TMPFILE is not available here (%v): the named fallback is used", err)
	}
}
