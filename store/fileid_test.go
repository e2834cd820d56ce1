package store

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

func TestNewFileIDFormat(t *testing.T) {
	for _, tm := range []time.Time{t0, time.Unix(0, 0), time.Unix(-100, 0), {}} {
		id := NewFileID(tm)
		if !ValidFileID(id) || len(id) != FileIDLen || !strings.HasPrefix(id, "file_svc_") {
			t.Fatalf("NewFileID(%v) = %q: not a valid id", tm, id)
		}
	}
	// The ULID carries the millisecond of t when t is later than every earlier id.
	future := time.Date(2100, 5, 6, 7, 8, 9, 123456789, time.UTC)
	u, err := ulid.ParseStrict(NewFileID(future)[len(FileIDPrefix):])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.Time(), uint64(future.UnixMilli()); got != want {
		t.Fatalf("ULID time %d, want %d", got, want)
	}
}

func TestTimestampMSClamps(t *testing.T) {
	f := func(tm time.Time, want uint64) {
		t.Helper()
		if got := timestampMS(tm); got != want {
			t.Fatalf("timestampMS(%v) = %d, want %d", tm, got, want)
		}
	}
	f(time.Time{}, 0)
	f(time.Unix(-1, 0), 0)
	f(time.Unix(1, 2e6), 1002)
	f(time.Date(11000, 1, 1, 0, 0, 0, 0, time.UTC), ulid.MaxTime())
}

func TestNewFileIDMonotonic(t *testing.T) {
	prev := NewFileID(time.Now())
	// Same millisecond many times, then a clock that goes back: ids still increase.
	same := time.Now().Add(time.Hour)
	for i := range 5000 {
		tm := same
		if i%100 == 99 {
			tm = same.Add(-time.Duration(i) * time.Second)
		}
		id := NewFileID(tm)
		if id <= prev {
			t.Fatalf("id %d: %q does not follow %q", i, id, prev)
		}
		prev = id
	}
}

func TestNewFileIDConcurrentUnique(t *testing.T) {
	const workers, each = 4, 2000
	var mu sync.Mutex
	seen := make(map[string]bool, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			ids := make([]string, each)
			for i := range ids {
				ids[i] = NewFileID(t0)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if seen[id] {
					t.Errorf("duplicate id %q", id)
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}

func TestValidFileID(t *testing.T) {
	good := "file_svc_01ARZ3NDEKTSV4RRFFQ69G5FAV"
	f := func(s string, want bool) {
		t.Helper()
		if got := ValidFileID(s); got != want {
			t.Fatalf("ValidFileID(%q) = %v, want %v", s, got, want)
		}
	}
	f(good, true)
	f("file_svc_7ZZZZZZZZZZZZZZZZZZZZZZZZZ", true)
	f("file_svc_00000000000000000000000000", true)
	f("file_svc_01arz3ndektsv4rrffq69g5fav", false) // lower case
	f("file_svc_01ARZ3NDEKTSV4RRFFQ69G5FAv", false)
	for _, c := range "ILOU" {
		f(good[:20]+string(c)+good[21:], false)
	}
	f("file_svc_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", false) // first char > 7
	f("file_svc_ZZZZZZZZZZZZZZZZZZZZZZZZZZ", false)
	f(good[:len(good)-1], false)   // short
	f(good+"0", false)             // long
	f("file-svc_"+good[9:], false) // prefix
	f("FILE_SVC_"+good[9:], false)
	f("file_"+good[9:], false)
	f(good[9:], false)
	f("", false)
	f("file_svc_01ARZ3NDEKTSV4RRFFQ69G5F\x00V", false)
}

var fileIDPattern = regexp.MustCompile(`^file_svc_[0-7][0-9A-HJKMNP-TV-Z]{25}$`)

// FuzzValidFileID checks ValidFileID against a regular expression of the spec's format.
func FuzzValidFileID(f *testing.F) {
	f.Add("file_svc_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	f.Add("file_svc_8ZZZZZZZZZZZZZZZZZZZZZZZZZ")
	f.Add("file_svc_01ARZ3NDEKTSV4RRFFQ69G5FAU")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidFileID(s), fileIDPattern.MatchString(s); got != want {
			t.Fatalf("ValidFileID(%q) = %v, pattern says %v", s, got, want)
		}
	})
}
