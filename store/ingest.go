package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// tablesDir is the folder, inside the store's directory, where an upload's table is built
// before Pebble ingests it. Pebble ignores it: its name is none of Pebble's files.
const tablesDir = "upload-tables"

// An upload of more than one chunk writes its chunks after the first into a table of its own
// and hands that table to Pebble whole (DB.Ingest), instead of committing each chunk.
//
// Committed, a chunk's bytes are written four times or more: to the write-ahead log, into the
// memtable, into a table when the memtable flushes, and again by every compaction that moves
// the table down the levels. Ingested, they are written once. The table's keys are the
// upload's own (its id is claimed, see claimFileID), so Pebble finds nothing of the same
// range in the memtable or in the levels, and puts the table straight into the lowest level
// whose tables do not span its keys: in the usual case the last, where no compaction rewrites
// it. Ingest syncs the table and Pebble's manifest, so the chunks are on disk before the
// metadata commit makes them visible, at either durability.
//
// A file of one chunk goes the committed way: a table and a manifest entry for every small
// file would cost more than the chunk.
type uploadTable struct {
	fs   vfs.FS
	path string
	w    *sstable.Writer
}

// newUploadTable creates the table file of one upload and its writer.
func (p *Pebble) newUploadTable() (*uploadTable, error) {
	path := p.fs.PathJoin(p.tables, strconv.FormatUint(p.tableSeq.Add(1), 10)+".sst")
	f, err := p.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("cannot write file data: %w", err)
	}
	return &uploadTable{fs: p.fs, path: path, w: sstable.NewWriter(objstorageprovider.NewFileWritable(f), p.tableOpts)}, nil
}

// set adds one chunk; keys come in increasing order, as the chunks' indexes do.
func (t *uploadTable) set(key, chunk []byte) error {
	if err := t.w.Set(key, chunk); err != nil {
		return fmt.Errorf("cannot write file data: %w", err)
	}
	return nil
}

// ingest finishes the table (its writer syncs and closes the file) and has db take it. An
// ingested table's path is removed by Ingest; one that failed is removed here.
func (t *uploadTable) ingest(db *pebble.DB) error {
	err := t.w.Close()
	t.w = nil
	if err == nil {
		err = db.Ingest(context.Background(), []string{t.path})
	}
	if err != nil {
		_ = t.fs.Remove(t.path) // one left behind is removed at the next open (openTablesDir)
		return fmt.Errorf("cannot write file data: %w", err)
	}
	return nil
}

// discard drops an unfinished table and its file.
func (t *uploadTable) discard() {
	if t.w != nil {
		_ = t.w.Close() // the file is removed next: whatever Close wrote goes with it
		t.w = nil
	}
	_ = t.fs.Remove(t.path)
}

// openTablesDir empties the tables' folder of dir, where a crash may have left a table that
// was never ingested, and returns its path.
func openTablesDir(fs vfs.FS, dir string) (string, error) {
	path := fs.PathJoin(dir, tablesDir)
	if err := fs.RemoveAll(path); err != nil {
		return "", fmt.Errorf("cannot clear %s: %w", path, err)
	}
	if err := fs.MkdirAll(path, 0o755); err != nil {
		return "", fmt.Errorf("cannot create %s: %w", path, err)
	}
	return path, nil
}

// uploadTableOptions are the writer options of an upload's table: those Pebble gives a table
// of the last level, in the newest format the store's version reads.
func uploadTableOptions(o *pebble.Options, db *pebble.DB) sstable.WriterOptions {
	return o.MakeWriterOptions(len(o.Levels)-1, db.TableFormat())
}
