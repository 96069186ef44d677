package changelog

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/dgraph-io/badger/v4/table"
)

// madvPageout is MADV_PAGEOUT (Linux 5.4): reclaim these pages now. It is
// a hint: it never changes what the memory holds, a page that is needed
// again is read back in, and an older kernel answers EINVAL, ignored here.
const madvPageout = 21

// releaseTablePages drops the resident pages of Badger's table files
// below level 0 from this process. released remembers the tables already
// handled, so each is advised once.
//
// Badger writes every table through a shared mapping of the new file and
// keeps it mapped, so each table it writes stays resident (RssFile) until
// memory pressure reclaims it: a restore of N bytes of state leaves about N
// bytes of file-backed pages counted in the process's RSS, on top of its
// heap. Those pages are clean (the table is synced before it is used) and
// are read back on demand by the reads that need them. Level-0 tables are
// left alone: a compaction reads them again soon.
func (db *DB) releaseTablePages(released map[uint64]bool) {
	keep := map[string]bool{}
	var any bool
	for _, t := range db.bdb.Tables() {
		if t.Level > 0 && !released[t.ID] {
			released[t.ID] = true
			keep[table.IDToFilename(t.ID)] = true
			any = true
		}
	}
	if !any {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	dir := []byte(filepath.Clean(db.dir) + string(filepath.Separator))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		path := line[i:]
		if !bytes.HasPrefix(path, dir) || !keep[string(path[len(dir):])] {
			continue
		}
		rng, _, _ := bytes.Cut(line, []byte(" "))
		lo, hi, ok := bytes.Cut(rng, []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// A table unmapped since Tables() answered leaves an unmapped range
		// (ENOMEM) or one reused by another mapping: either way only a hint
		// is lost or misapplied, never data.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout)
	}
}
