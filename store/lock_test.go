package store

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// holdDirEnv names the store directory that TestHoldStoreHelper holds, in a child process.
const holdDirEnv = "STORE_TEST_HOLD_DIR"

// TestHoldStoreHelper is the child process of TestOpenPebbleHeldByAnotherProcess: it opens
// the store, says so on stdout, and holds it until its stdin closes.
func TestHoldStoreHelper(t *testing.T) {
	dir := os.Getenv(holdDirEnv)
	if dir == "" {
		t.Skip("runs as the child of TestOpenPebbleHeldByAnotherProcess")
	}
	p, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("held\n")
	bufio.NewReader(os.Stdin).ReadString('\n')
	p.Close()
}

func TestOpenPebbleHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldStoreHelper$")
	cmd.Env = append(os.Environ(), holdDirEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "held\n" {
		t.Fatalf("the child did not open the store: %q %v", line, err)
	}
	checkLocked(t, dir)
}

func TestOpenPebbleHeldInThisProcess(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	checkLocked(t, dir)
}

// checkLocked opens the held store at dir and checks that the error says so, once.
func checkLocked(t *testing.T, dir string) {
	t.Helper()
	p, err := OpenPebble(dir, PebbleOptions{})
	if err == nil {
		p.Close()
		t.Fatal("a held store opened")
	}
	msg := err.Error()
	if !errors.Is(err, ErrLocked) || strings.Count(msg, "another process") != 1 ||
		strings.Count(msg, "cannot open store") != 1 || strings.Contains(msg, "temporarily unavailable") {
		t.Fatalf("error %q", msg)
	}
}
