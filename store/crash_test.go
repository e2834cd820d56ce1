package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// crashDirEnv names the store directory of the child process of TestCrashKill, and
// crashDurabilityEnv the Durability it opens the store with.
const (
	crashDirEnv        = "STORE_CRASH_CHILD_DIR"
	crashDurabilityEnv = "STORE_CRASH_CHILD_DURABILITY"
)

const (
	crashOwner = "crash"
	crashChunk = 4096
)

// crashSize is the size of the upload of seed: from 1 byte to 16 chunks.
func crashSize(seed int) int { return 1 + seed*7919%(16*crashChunk) }

// TestCrashChild is the child process of TestCrashKill; it does nothing in a normal run. It
// uploads files in a loop from two goroutines and prints "ack <id> <seed>" for each one that
// PutFile acknowledged, and records responses in a loop from a third, printing "resp <n>"
// for each one that PutResponse acknowledged. It also starts one upload that stalls half way,
// after its chunks were flushed to an sstable, and prints "stuck <id>".
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("child process of TestCrashKill")
	}
	d, _ := ParseDurability(os.Getenv(crashDurabilityEnv))
	p, err := OpenPebble(dir, PebbleOptions{ChunkSize: crashChunk, Logger: quietLogger{}, Durability: d})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		outMu.Lock()
		os.Stdout.WriteString(line) // one write per line: the parent never sees half a line
		outMu.Unlock()
	}
	upload := func(seed int) {
		f := File{Owner: crashOwner, Filename: strconv.Itoa(seed), Purpose: "crash", Created: time.Now()}
		got, err := p.PutFile(f, bytes.NewReader(testData(uint64(seed), crashSize(seed))), 1<<20)
		if err != nil {
			say("error %v\n", err)
			os.Exit(2)
		}
		say("ack %s %d\n", got.ID, seed)
	}
	for seed := range 10 {
		upload(seed)
	}
	for w := range 2 {
		go func() {
			for seed := 10 + w; ; seed += 2 {
				upload(seed)
			}
		}()
	}
	go func() {
		for n := 0; ; n++ {
			if err := p.PutResponse(crashResponse(n)); err != nil {
				say("error %v\n", err)
				os.Exit(2)
			}
			say("resp %d\n", n)
		}
	}()
	stuck := NewFileID(time.Now())
	r := &stallingReader{data: testData(0, 10*crashChunk), at: 5 * crashChunk, stall: func() {
		if err := p.db.Flush(); err != nil {
			say("error %v\n", err)
			os.Exit(2)
		}
		say("stuck %s\n", stuck)
	}}
	p.PutFile(File{ID: stuck, Owner: crashOwner, Filename: "stuck"}, r, 1<<20)
	say("error the stalled upload returned\n")
	os.Exit(2)
}

// stallingReader yields data up to at, calls stall and then blocks forever.
type stallingReader struct {
	data  []byte
	at    int
	stall func()
}

func (r *stallingReader) Read(b []byte) (int, error) {
	if r.at == 0 {
		r.stall()
		select {}
	}
	n := copy(b[:min(len(b), r.at)], r.data)
	r.data, r.at = r.data[n:], r.at-n
	return n, nil
}

// crashResponse is the n-th record that the child of TestCrashKill writes.
func crashResponse(n int) Response {
	return Response{ID: fmt.Sprintf("resp_%d", n), Owner: crashOwner, Model: "m", Deployment: "d", Created: t0.Add(time.Duration(n))}
}

// TestCrashKill kills, at each durability level, a process that uploads files and records
// responses with SIGKILL and checks that every acknowledged file and response is intact after
// reopening, that no partial file is visible, and that the chunks of the cut uploads are
// swept.
func TestCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	for _, d := range []Durability{DurabilityProcess, DurabilityMachine} {
		t.Run(d.String(), func(t *testing.T) { testCrashKill(t, d) })
	}
}

func testCrashKill(t *testing.T, d Durability) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashDurabilityEnv+"="+d.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child uploads forever: never leave it behind.
	t.Cleanup(func() { cmd.Process.Kill() })
	acked := map[string]int{} // id → seed
	responses := 0            // records acknowledged: 0..responses-1
	stuck, killed := "", false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 3 && fields[0] == "ack":
			seed, err := strconv.Atoi(fields[2])
			if err != nil {
				t.Fatalf("bad line %q", sc.Text())
			}
			acked[fields[1]] = seed
		case len(fields) == 2 && fields[0] == "resp" && fields[1] == strconv.Itoa(responses):
			responses++
		case len(fields) == 2 && fields[0] == "stuck":
			stuck = fields[1]
		default:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child said %q; stderr:\n%s", sc.Text(), stderr.String())
		}
		if !killed && stuck != "" && len(acked) >= 40 && responses >= 40 {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended unkilled (%v); stderr:\n%s", err, stderr.String())
	}
	t.Logf("killed the child after %d acknowledged uploads and %d responses", len(acked), responses)

	// The stalled upload's chunks reached an sstable before the kill: the crash left orphans.
	if n := countRawChunks(t, dir, stuck); n == 0 {
		t.Fatal("the stalled upload left no chunks: the test does not exercise the sweep")
	}
	p := (&testEnv{t: t, dir: dir, opts: PebbleOptions{Logger: quietLogger{}}}).open()
	if keys := p.fileKeys(t, crashOwner, stuck); len(keys) != 0 {
		t.Fatalf("stalled upload left keys after reopen: %q", keys)
	}
	for id, seed := range acked {
		data, err := p.AppendFileData(nil, crashOwner, id, time.Now())
		if err != nil {
			t.Fatalf("acknowledged file %s (seed %d): %v", id, seed, err)
		}
		if !bytes.Equal(data, testData(uint64(seed), crashSize(seed))) {
			t.Fatalf("acknowledged file %s (seed %d) has wrong bytes", id, seed)
		}
	}
	for n := range responses {
		want := crashResponse(n)
		got, err := p.GetResponse(want.ID)
		if err != nil || got.Owner != want.Owner || !got.Created.Equal(want.Created) {
			t.Fatalf("acknowledged response %s: %+v, %v", want.ID, got, err)
		}
	}
	visible := checkCrashVisible(t, p)
	if visible < len(acked) {
		t.Fatalf("%d files visible, fewer than the %d acknowledged", visible, len(acked))
	}
	if n, _ := p.FileStats(); n != int64(visible) {
		t.Fatalf("FileStats count %d, %d files visible", n, visible)
	}
	checkNoOrphans(t, p)
}

// checkCrashVisible checks that every visible file (acknowledged or committed just before the
// kill) is complete, and returns how many there are.
func checkCrashVisible(t *testing.T, p *Pebble) int {
	t.Helper()
	q := ListQuery{Now: time.Now(), Limit: MaxListLimit}
	visible := 0
	for {
		files, more, err := p.ListFiles(crashOwner, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			seed, err := strconv.Atoi(f.Filename)
			if err != nil || f.Size != int64(crashSize(seed)) {
				t.Fatalf("visible file %+v is not a complete upload", f)
			}
			data, err := p.AppendFileData(nil, crashOwner, f.ID, q.Now)
			if err != nil || !bytes.Equal(data, testData(uint64(seed), crashSize(seed))) {
				t.Fatalf("visible file %s (seed %d) is damaged: %v", f.ID, seed, err)
			}
		}
		visible += len(files)
		if !more {
			return visible
		}
		q.After = files[len(files)-1].ID
	}
}

// checkNoOrphans checks that every stored chunk belongs to a file with metadata.
func checkNoOrphans(t *testing.T, p *Pebble) {
	t.Helper()
	for _, k := range p.rawKeys(t, prefixFileData) {
		owner, id, ok := parseChunkKey([]byte(k))
		if !ok {
			t.Fatalf("malformed chunk key %q", k)
		}
		if _, err := p.getFileMeta(string(owner), string(id)); err != nil {
			t.Fatalf("chunk %q has no file: %v", k, err)
		}
	}
}

// countRawChunks opens the database directly, without the sweep, and counts the chunks of
// the crash owner's id.
func countRawChunks(t *testing.T, dir, id string) int {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	prefix := appendChunkPrefix(nil, crashOwner, id)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// TestPowerLossKeepsAcknowledgedWrites checks durability, not just atomicity: at
// DurabilityMachine, after every acknowledged write it takes a crash clone of an in-memory
// file system holding only the data that was synced, opens the clone and checks the whole
// expected state.
func TestPowerLossKeepsAcknowledgedWrites(t *testing.T) {
	runCrashClones(t, DurabilityMachine, vfs.CrashCloneCfg{UnsyncedDataPercent: 0}, verifyState)
}

// TestProcessKillKeepsAcknowledgedWrites checks DurabilityProcess against the death of the
// process: the clone keeps every byte written to a file (the kernel still has it) and
// nothing that only the process held, and must show the whole expected state.
func TestProcessKillKeepsAcknowledgedWrites(t *testing.T) {
	cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 2))}
	runCrashClones(t, DurabilityProcess, cfg, verifyState)
}

// TestPowerLossAtProcessDurabilityOpens checks what DurabilityProcess promises for a crash of
// the machine: recent writes may be lost, but the store opens, and what it shows is whole.
func TestPowerLossAtProcessDurabilityOpens(t *testing.T) {
	for _, pct := range []int{0, 50} {
		t.Run(fmt.Sprintf("unsynced-%d%%", pct), func(t *testing.T) {
			cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: pct}
			if pct > 0 {
				cfg.RNG = rand.New(rand.NewPCG(1, uint64(pct)))
			}
			runCrashClones(t, DurabilityProcess, cfg, verifyWhole)
		})
	}
}

// crashVerifier checks a store opened on a crash clone against the acknowledged state: the
// responses and files (id → bytes) that exist after the last acknowledged write.
type crashVerifier func(t *testing.T, step string, p *Pebble, resp map[string]Response, files map[string][]byte)

// runCrashClones runs a sequence of writes at durability d and, after each acknowledged one,
// opens a crash clone of the file system taken with cfg and checks it with verify.
func runCrashClones(t *testing.T, d Durability, cfg vfs.CrashCloneCfg, verify crashVerifier) {
	fs := vfs.NewCrashableMem()
	opts := PebbleOptions{FS: fs, ChunkSize: testChunk, Logger: quietLogger{}, Durability: d}
	p, err := OpenPebble("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	wantResp := map[string]Response{}
	wantFiles := map[string][]byte{}
	var orphan string
	check := func(step string) {
		t.Helper()
		cloneOpts := opts
		cloneOpts.FS = fs.CrashClone(cfg)
		c, err := OpenPebble("db", cloneOpts)
		if err != nil {
			t.Fatalf("%s: open after crash: %v", step, err)
		}
		defer c.Close()
		verify(t, step, c, wantResp, wantFiles)
		if orphan != "" {
			if keys := c.fileKeys(t, "o", orphan); len(keys) != 0 {
				t.Fatalf("%s: orphan survived: %q", step, keys)
			}
		}
	}
	for i := range 4 {
		r := Response{ID: fmt.Sprintf("resp_%d", i), Owner: "o", Model: "m", Deployment: "d", Created: t0.Add(time.Duration(i) * time.Hour)}
		if err := p.PutResponse(r); err != nil {
			t.Fatal(err)
		}
		wantResp[r.ID] = r
		check("PutResponse")

		data := testData(uint64(i), i*testChunk+7)
		f := putFile(t, p, File{Owner: "o", Filename: "f", Created: t0, Expires: t0.Add(time.Duration(i+1) * time.Hour)}, data)
		wantFiles[f.ID] = data
		check("PutFile")
	}
	if err := p.DeleteResponse("resp_3"); err != nil {
		t.Fatal(err)
	}
	delete(wantResp, "resp_3")
	check("DeleteResponse")
	if n, err := p.ReclaimResponses(t0.Add(90 * time.Minute)); err != nil || n != 2 {
		t.Fatalf("ReclaimResponses = %d, %v", n, err)
	}
	delete(wantResp, "resp_0")
	delete(wantResp, "resp_1")
	check("ReclaimResponses")
	var last string
	for id := range wantFiles {
		last = max(last, id)
	}
	if err := p.DeleteFile("o", last); err != nil {
		t.Fatal(err)
	}
	delete(wantFiles, last)
	check("DeleteFile")

	// Chunks of an unfinished upload, made durable by a later synced write: the sweep of the
	// next open must remove them.
	orphan = NewFileID(t0)
	crashedUpload(t, p.beginUpload, p.chunkSize, "o", orphan, testData(7, 3*testChunk))

	if n, err := p.ReclaimExpired(t0.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("ReclaimExpired = %d, %v", n, err)
	}
	for id, data := range wantFiles {
		if len(data) == 7 {
			delete(wantFiles, id) // the first file expired at t0+1h
		}
	}
	check("ReclaimExpired")
}

// verifyWhole is the check of a crash that may lose recent writes: every record read back is
// whole and has the fields it was written with, and every visible file of the scenario has
// the bytes it was uploaded with and is counted.
func verifyWhole(t *testing.T, step string, p *Pebble, _ map[string]Response, _ map[string][]byte) {
	t.Helper()
	for _, k := range p.rawKeys(t, prefixResponse) {
		id := strings.TrimPrefix(k, prefixResponse)
		got, err := p.GetResponse(id)
		if err != nil || got.Owner != "o" || got.Model != "m" || got.Deployment != "d" ||
			got.ID != fmt.Sprintf("resp_%d", got.Created.Sub(t0)/time.Hour) {
			t.Fatalf("%s: record %q read back as %+v, %v", step, id, got, err)
		}
	}
	files, _, err := p.ListFiles("o", ListQuery{Now: t0, Limit: MaxListLimit})
	if err != nil {
		t.Fatalf("%s: ListFiles: %v", step, err)
	}
	var size int64
	for _, f := range files {
		i := int(f.Expires.Sub(t0)/time.Hour) - 1
		data, err := p.AppendFileData(nil, "o", f.ID, t0)
		if err != nil || !bytes.Equal(data, testData(uint64(i), i*testChunk+7)) {
			t.Fatalf("%s: visible file %s is damaged: %v", step, f.ID, err)
		}
		size += f.Size
	}
	if n, b := p.FileStats(); n != int64(len(files)) || b != size {
		t.Fatalf("%s: FileStats = %d, %d with %d files of %d bytes visible", step, n, b, len(files), size)
	}
}

func verifyState(t *testing.T, step string, p *Pebble, resp map[string]Response, files map[string][]byte) {
	t.Helper()
	keys := p.rawKeys(t, prefixResponse)
	if len(keys) != len(resp) {
		t.Fatalf("%s: %d responses stored, want %d", step, len(keys), len(resp))
	}
	for id, want := range resp {
		got, err := p.GetResponse(id)
		if err != nil || got.ID != want.ID || got.Owner != want.Owner || got.Model != want.Model ||
			got.Deployment != want.Deployment || !got.Created.Equal(want.Created) {
			t.Fatalf("%s: GetResponse(%s) = %+v, %v; want %+v", step, id, got, err, want)
		}
	}
	var size int64
	for id, want := range files {
		data, err := p.AppendFileData(nil, "o", id, t0)
		if err != nil || !bytes.Equal(data, want) {
			t.Fatalf("%s: file %s lost or damaged: %v", step, id, err)
		}
		size += int64(len(want))
	}
	if n, b := p.FileStats(); n != int64(len(files)) || b != size {
		t.Fatalf("%s: FileStats = %d, %d; want %d, %d", step, n, b, len(files), size)
	}
	if _, err := p.GetResponse("resp_never"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("%s: GetResponse(never) = %v", step, err)
	}
}
