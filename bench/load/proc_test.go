package load

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	f := func(line string, wantPPID int, wantTicks uint64, wantErr bool) {
		t.Helper()
		ppid, ticks, err := parseStat([]byte(line))
		if (err != nil) != wantErr || ppid != wantPPID || ticks != wantTicks {
			t.Fatalf("parseStat(%q) = %d, %d, %v", line, ppid, ticks, err)
		}
	}
	rest := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	f("1234 (nginx) S 77 1 1 0 -1 4194560 10 0 0 0 250 31"+rest, 77, 281, false)
	f("1234 (a) b (c)) R 5 1 1 0 -1 0 0 0 0 0 7 8"+rest, 5, 15, false)
	f("1234 (x) S 1 2 3", 0, 0, true)
	f("1234 x S 1", 0, 0, true)
	f("1234 (x) S one 1 1 0 -1 0 0 0 0 0 7 8"+rest, 0, 0, true)
}

func TestStatusKB(t *testing.T) {
	b := []byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n")
	if n, err := statusKB(b, "VmRSS:"); err != nil || n != 1024<<10 {
		t.Fatalf("VmRSS = %d, %v", n, err)
	}
	if n, err := statusKB(b, "VmHWM:"); err != nil || n != 2048<<10 {
		t.Fatalf("VmHWM = %d, %v", n, err)
	}
	if _, err := statusKB(b, "VmSwap:"); !errors.Is(err, ErrProcFormat) {
		t.Fatalf("missing line: %v", err)
	}
	if _, err := statusKB([]byte("Name:\tx\nVmRSS:\t12 MB\n"), "VmRSS:"); !errors.Is(err, ErrProcFormat) {
		t.Fatalf("bad unit: %v", err)
	}
}

func TestReadProcSelf(t *testing.T) {
	pid := os.Getpid()
	before, err := ReadProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS == 0 || before.HWM < before.RSS {
		t.Fatalf("rss=%d hwm=%d", before.RSS, before.HWM)
	}
	// Burn CPU until the kernel's counter moves by 20 ms (two ticks at 100 Hz).
	var after ProcStat
	var x uint64
	for spin := time.Now(); time.Since(spin) < 10*time.Second; {
		for i := range 1_000_000 {
			x += uint64(i) * x
		}
		if after, err = ReadProc(pid); err != nil {
			t.Fatal(err)
		}
		if after.CPU-before.CPU >= 20*time.Millisecond {
			break
		}
	}
	runtime.KeepAlive(x)
	if after.CPU-before.CPU < 20*time.Millisecond {
		t.Fatalf("cpu time did not move: %v -> %v", before.CPU, after.CPU)
	}
	sum, err := ReadProcs(pid, pid)
	if err != nil || sum.RSS == 0 || sum.CPU < 2*after.CPU {
		t.Fatalf("ReadProcs(pid, pid) = %+v, %v", sum, err)
	}
	if _, err := ReadProc(1 << 30); err == nil {
		t.Fatal("ReadProc of a missing pid succeeded")
	}
	if hz := clockTicks(); hz != 100 && hz != 250 && hz != 1000 {
		t.Fatalf("clock ticks %d", hz)
	}
}

func TestSamplerSeesPeak(t *testing.T) {
	pid := os.Getpid()
	s, err := StartSampler(5*time.Millisecond, pid)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	u, err := s.Stop()
	runtime.KeepAlive(buf)
	if err != nil {
		t.Fatal(err)
	}
	if u.RSSPeak < u.RSSStart+size*3/4 || u.RSSPeak < u.RSSEnd || u.HWM < u.RSSPeak/2 {
		t.Fatalf("usage %+v, want a peak %d MiB above the start", u, size>>20)
	}
	if u.Samples < 2 || u.CPU < 0 || u.Elapsed <= 0 {
		t.Fatalf("usage %+v", u)
	}
	if got := (&Usage{CPU: 3 * time.Millisecond}).CPUPerRequest(1000); got != 3 {
		t.Fatalf("CPUPerRequest = %v µs, want 3", got)
	}

	empty, err := StartSampler(0)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := empty.Stop(); err != nil || u.RSSPeak != 0 || u.CPU != 0 {
		t.Fatalf("empty sampler %+v, %v", u, err)
	}
}

func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a child: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	kids, err := Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kids, cmd.Process.Pid) {
		t.Fatalf("children %v lack %d", kids, cmd.Process.Pid)
	}
}

func TestRaiseFileLimit(t *testing.T) {
	got, err := RaiseFileLimit(16)
	if err != nil || got < 16 {
		t.Fatalf("RaiseFileLimit(16) = %d, %v", got, err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur != got {
		t.Fatalf("soft limit %d, RaiseFileLimit said %d", lim.Cur, got)
	}
	if lim.Max >= 1<<62 {
		t.Skipf("hard limit %d: nothing is too many", lim.Max)
	}
	got, err = RaiseFileLimit(1 << 62)
	if !errors.Is(err, ErrFileLimit) || got != lim.Max {
		t.Fatalf("RaiseFileLimit(huge) = %d, %v", got, err)
	}
}
