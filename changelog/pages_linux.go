package changelog

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// madvPageout is MADV_PAGEOUT (Linux 5.4): reclaim these pages now. It is
// a hint: it never changes what the memory holds, a page that is needed
// again is read back in, and an older kernel answers EINVAL, ignored here.
const madvPageout = 21

// releaseTablePages drops the resident pages of the table files of the
// Badger DBs in dirs from this process.
//
// Badger writes every table through a shared mapping of the new file and
// keeps it mapped, so each table it writes stays resident (RssFile) until
// memory pressure reclaims it: a restore of N bytes of state leaves about N
// bytes of file-backed pages counted in the process's RSS, on top of its
// heap, and a compaction faults in every table it reads. Those pages are
// clean once the table is synced, and are read back on demand by the reads
// that need them (a later compaction reads its inputs from the file, in
// order). It covers tables a compaction is still writing (mapped, not yet
// in a level), because a compaction of a full level 0 writes as much as
// level 0 holds before it lists any of its tables.
func releaseTablePages(dirs []string) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	prefixes := make([][]byte, len(dirs))
	for i, d := range dirs {
		prefixes[i] = []byte(filepath.Clean(d) + string(filepath.Separator))
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		path := line[i:]
		if !bytes.HasSuffix(path, []byte(".sst")) || !slices.ContainsFunc(prefixes, func(p []byte) bool { return bytes.HasPrefix(path, p) }) {
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
		// A table unmapped since the maps were read leaves an unmapped
		// range (ENOMEM) or one reused by another mapping, and a page still
		// dirty is written back before it is dropped: either way only a hint
		// is lost or misapplied, never data.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout)
	}
}
