package changelog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
)

// checkLostTables refuses a task DB whose MANIFEST lost the tables of
// flushes that its memtable logs build on. Badger deletes the tables a
// MANIFEST does not name and replays the memtable logs (the latest writes,
// with the latest applied offsets) onto the tables it does: after a MANIFEST
// cut short, that is older data under newer offsets, and a restore would
// replay only the changelog's tail onto it.
//
// A table newer than every table the MANIFEST names (a higher version) is
// the output of a flush. While its memtable log is still there, the flush
// was cut off by a crash and the log replays it; once the oldest log holds
// only newer writes, the flush had completed and the MANIFEST forgot it.
// A compaction cut off by a crash leaves tables too, but they hold only
// versions the named tables hold.
func checkLostTables(dir string, named map[uint64]badger.TableManifest, namedMax uint64) error {
	files, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("changelog: verify state dir %s: %w", dir, err)
	}
	var lost []string
	var lostMax uint64
	memMin := uint64(math.MaxUint64)
	for _, f := range files {
		path := filepath.Join(dir, f.Name())
		switch {
		case strings.HasSuffix(f.Name(), ".sst"):
			id, err := strconv.ParseUint(strings.TrimSuffix(f.Name(), ".sst"), 10, 64)
			if err != nil {
				continue
			}
			if _, ok := named[id]; ok {
				continue
			}
			if v, ok := tableMaxVersion(path, id); ok && v > namedMax {
				lost = append(lost, f.Name())
				lostMax = max(lostMax, v)
			}
		case strings.HasSuffix(f.Name(), ".mem"):
			if v, ok := firstLogVersion(path); ok {
				memMin = min(memMin, v)
			}
		}
	}
	if len(lost) == 0 || memMin == math.MaxUint64 || memMin <= lostMax {
		return nil
	}
	return fmt.Errorf("changelog: verify state dir %s: %w: the MANIFEST does not name tables %v, which the memtable logs build on",
		dir, ErrCorrupt, lost)
}

// tableMaxVersion reads the highest version a table holds from its index;
// ok is false when the table cannot be read.
func tableMaxVersion(path string, id uint64) (v uint64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() < 8 {
		return 0, false
	}
	data, err := z.Mmap(f, false, fi.Size())
	if err != nil {
		return 0, false
	}
	defer func() { _ = z.Munmap(data) }()
	defer func() {
		if recover() != nil {
			v, ok = 0, false
		}
	}()
	t, err := table.OpenInMemoryTable(data, id, &table.Options{ChkMode: options.NoVerification, Compression: options.None})
	if err != nil {
		return 0, false
	}
	return t.MaxVersion(), true
}

// memLogHeader is the size of a memtable log's header (Badger's
// vlogHeaderSize: an encryption key id and a base IV).
const memLogHeader = 20

// firstLogVersion reads the version of a memtable log's first entry; ok is
// false when it holds none Badger would replay (empty, zeroed or damaged).
// An entry is a header (meta, user meta, uvarint key and value lengths and
// expiry), the key with its version, the value, and a CRC-32C of all that.
func firstLogVersion(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	buf := make([]byte, maxFirstEntry)
	n, err := f.ReadAt(buf, memLogHeader)
	if err != nil && err != io.EOF {
		return 0, false
	}
	b := buf[:n]
	if len(b) < 2 {
		return 0, false
	}
	i := 2
	var lens [3]uint64
	for j := range lens {
		v, m := binary.Uvarint(b[i:])
		if m <= 0 {
			return 0, false
		}
		lens[j], i = v, i+m
	}
	klen, vlen := lens[0], lens[1]
	if klen <= 8 || klen > 1<<16 || uint64(len(b)-i) < klen+vlen+crc32.Size {
		return 0, false
	}
	end := i + int(klen+vlen)
	if crc32.Checksum(b[:end], y.CastagnoliCrcTable) != binary.BigEndian.Uint32(b[end:]) {
		return 0, false
	}
	return y.ParseTs(b[i : i+int(klen)]), true
}

// maxFirstEntry bounds what firstLogVersion reads: an entry's key is at
// most 64 KiB, and a value large enough to go to the value log is a
// pointer in the memtable log.
const maxFirstEntry = 128 << 10
