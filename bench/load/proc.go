package load

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// ErrProcFormat is returned when a /proc file does not read as expected.
var ErrProcFormat = errors.New("load: unexpected /proc format")

// ProcStat is one reading of a set of processes from /proc; with several
// processes (an nginx master and its workers) every field is their sum.
type ProcStat struct {
	CPU time.Duration // user+system time consumed since the processes started
	RSS uint64        // resident set size now, bytes (VmRSS)
	HWM uint64        // peak resident set size, bytes (VmHWM; cannot be reset)
}

// ReadProcs reads /proc/<pid>/stat and /proc/<pid>/status of each pid and
// returns their sum; no pid gives the zero ProcStat.
func ReadProcs(pids ...int) (ProcStat, error) {
	var sum ProcStat
	for _, pid := range pids {
		st, err := ReadProc(pid)
		if err != nil {
			return ProcStat{}, err
		}
		sum.CPU += st.CPU
		sum.RSS += st.RSS
		sum.HWM += st.HWM
	}
	return sum, nil
}

// ReadProc reads the CPU time and memory of one process.
func ReadProc(pid int) (ProcStat, error) {
	cpu, err := readCPU(pid)
	if err != nil {
		return ProcStat{}, err
	}
	rss, hwm, err := readMem(pid)
	if err != nil {
		return ProcStat{}, err
	}
	return ProcStat{CPU: cpu, RSS: rss, HWM: hwm}, nil
}

// readCPU returns utime+stime of /proc/<pid>/stat.
func readCPU(pid int) (time.Duration, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cannot read %q: %w", path, err)
	}
	_, ticks, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q: %w", path, err)
	}
	return time.Duration(ticks) * time.Second / time.Duration(clockTicks()), nil
}

// parseStat returns the parent pid (field 4) and utime+stime (fields 14
// and 15, in clock ticks) of a /proc/<pid>/stat line.
func parseStat(b []byte) (ppid int, ticks uint64, err error) {
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after it start past its last ')', with field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no ')': %w", ErrProcFormat)
	}
	f := bytes.Fields(b[i+1:])
	const first, ppidField, utimeField = 3, 4, 14
	if len(f) <= utimeField+1-first {
		return 0, 0, fmt.Errorf("%d fields: %w", len(f)+first-1, ErrProcFormat)
	}
	if ppid, err = strconv.Atoi(string(f[ppidField-first])); err != nil {
		return 0, 0, err
	}
	for _, s := range f[utimeField-first : utimeField-first+2] {
		n, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, 0, err
		}
		ticks += n
	}
	return ppid, ticks, nil
}

// readMem returns VmRSS and VmHWM of /proc/<pid>/status in bytes.
func readMem(pid int) (rss, hwm uint64, err error) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot read %q: %w", path, err)
	}
	if rss, err = statusKB(b, "VmRSS:"); err != nil {
		return 0, 0, fmt.Errorf("cannot parse %q: %w", path, err)
	}
	if hwm, err = statusKB(b, "VmHWM:"); err != nil {
		return 0, 0, fmt.Errorf("cannot parse %q: %w", path, err)
	}
	return rss, hwm, nil
}

// statusKB returns the value of a "Name:   123 kB" line of b, in bytes.
func statusKB(b []byte, name string) (uint64, error) {
	i := bytes.Index(b, []byte("\n"+name))
	if i < 0 {
		return 0, fmt.Errorf("no %s line: %w", name, ErrProcFormat)
	}
	line := b[i+1+len(name):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) != 2 || string(f[1]) != "kB" {
		return 0, fmt.Errorf("bad %s line %q: %w", name, line, ErrProcFormat)
	}
	n, err := strconv.ParseUint(string(f[0]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad %s line %q: %w", name, line, err)
	}
	return n << 10, nil
}

var (
	clockTicksOnce sync.Once
	clockTicksHz   uint64
)

// clockTicks returns the kernel's USER_HZ, the unit of /proc/<pid>/stat
// times: AT_CLKTCK of this process's auxiliary vector, else 100, the value
// of every Linux ABI.
func clockTicks() uint64 {
	clockTicksOnce.Do(func() {
		clockTicksHz = 100
		b, err := os.ReadFile("/proc/self/auxv")
		if err != nil {
			return
		}
		const atClkTck = 17
		for ; len(b) >= 16; b = b[16:] {
			if binary.NativeEndian.Uint64(b) == atClkTck {
				if hz := binary.NativeEndian.Uint64(b[8:]); hz > 0 {
					clockTicksHz = hz
				}
				return
			}
		}
	})
	return clockTicksHz
}

// Children returns the pids whose parent is pid, found by scanning /proc.
func Children(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("cannot list /proc: %w", err)
	}
	var kids []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := readPPID(child); err == nil && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids, nil
}

// readPPID returns the parent pid of pid.
func readPPID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	ppid, _, err := parseStat(b)
	return ppid, err
}
