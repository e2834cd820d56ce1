package wire

import (
	"net"
	"testing"
	"time"
)

// TestOpenConnsCountsDials: a dialed connection counts in OpenConns until
// its first Close; a dial that fails leaves nothing counted.
func TestOpenConnsCountsDials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &dialer{connect: 5 * time.Second, firstByte: time.Second, idle: time.Second}
	before := OpenConns()
	c, err := d.Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := OpenConns() - before; got != 1 {
		t.Fatalf("after a dial: %d more open, want 1", got)
	}
	c.Close()
	c.Close()
	if got := OpenConns() - before; got != 0 {
		t.Fatalf("after Close twice: %d more open, want 0", got)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	if _, err := d.Dial(addr); err == nil {
		t.Fatal("a dial to a closed port worked")
	}
	if got := OpenConns() - before; got != 0 {
		t.Fatalf("after a failed dial: %d more open, want 0", got)
	}
}
