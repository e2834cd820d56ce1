package rawio

import (
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkMachine measures what the machine's kernel charges for the
// operations the request path is made of (docs/performance.md, "What this
// machine's kernel charges"): a system call that does nothing, a read that
// finds nothing, a clock read, a pair of read-deadline changes (awaitNext's
// bound), and the first touch of a page of anonymous memory, plain and
// advised MADV_HUGEPAGE (per 4 KiB either way).
func BenchmarkMachine(b *testing.B) {
	b.Run("getpid", func(b *testing.B) {
		for b.Loop() {
			syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0)
		}
	})
	b.Run("read-EAGAIN", func(b *testing.B) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer syscall.Close(fds[0])
		defer syscall.Close(fds[1])
		syscall.SetNonblock(fds[0], true)
		p := make([]byte, 4096)
		for b.Loop() {
			if _, e := sysRead(uintptr(fds[0]), p); e != syscall.EAGAIN {
				b.Fatal(e)
			}
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		var sink int64
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
		_ = sink
	})
	b.Run("read-deadline-pair", func(b *testing.B) {
		x, _, _ := tcpPair(b)
		far := time.Now().Add(2 * time.Minute)
		for b.Loop() {
			x.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			x.SetReadDeadline(far)
		}
	})
	for _, huge := range []bool{false, true} {
		name := "page-fault-4KiB"
		if huge {
			name = "page-fault-per-4KiB-hugepage"
		}
		b.Run(name, func(b *testing.B) { touchPages(b, huge) })
	}
}

// touchPages touches one byte of each 4 KiB of fresh anonymous mappings of
// 16 MiB, advised MADV_HUGEPAGE when huge (aligned to 2 MiB, so that every
// huge page can be one).
func touchPages(b *testing.B, huge bool) {
	const size, align = 16 << 20, 2 << 20
	for i := 0; i < b.N; {
		m, err := syscall.Mmap(-1, 0, size+align, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		p := uintptr(unsafe.Pointer(&m[0]))
		start := int((p+align-1)&^(align-1) - p)
		if huge {
			if err := syscall.Madvise(m[start:start+size], 14 /* MADV_HUGEPAGE */); err != nil {
				b.Skip("MADV_HUGEPAGE:", err)
			}
		}
		for off := start; off < start+size && i < b.N; off += 4 << 10 {
			m[off] = 1
			i++
		}
		syscall.Munmap(m)
	}
}
