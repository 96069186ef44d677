package changelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tidemark-streams/tidemark/store"
)

// Key space prefixes; see the package doc.
const (
	nsData   = 'd'
	nsIndex  = 'i'
	nsMeta   = 'm'
	nsStaged = 's'
)

// Meta sub-spaces.
const (
	metaOffset   = 'o' // topic 0x00 partition -> offset, applied-at
	metaCut      = 'c' // store prefix -> expiry cut
	metaRegistry = 'r' // store prefix -> kind, topic
	metaFormat   = 'v' // -> format version
	metaApplied  = 'a' // epoch -> staged apply committed
)

// formatVersion is stored once per DB; a DB of another version is rebuilt.
const formatVersion = 1

// Changelog key tags: the first byte of every changelog record key.
const (
	tagKeyValue = 'k'
	tagWindow   = 'w'
	tagSession  = 's'
)

var errBadKey = errors.New("changelog: malformed key")

func kindTag(k store.Kind) byte {
	switch k {
	case store.KindWindow:
		return tagWindow
	case store.KindSession:
		return tagSession
	}
	return tagKeyValue
}

func tagKind(tag byte) (store.Kind, bool) {
	switch tag {
	case tagKeyValue:
		return store.KindKeyValue, true
	case tagWindow:
		return store.KindWindow, true
	case tagSession:
		return store.KindSession, true
	}
	return 0, false
}

// storeID is "<len><name><partition>": prefix-free across stores because
// the length comes first.
func storeID(name string, partition int32) []byte {
	b := make([]byte, 0, 2+len(name)+4)
	b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	b = append(b, name...)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

func parseStoreID(b []byte) (name string, partition int32, err error) {
	if len(b) < 2 {
		return "", 0, errBadKey
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) != 2+n+4 {
		return "", 0, errBadKey
	}
	return string(b[2 : 2+n]), int32(binary.BigEndian.Uint32(b[2+n:])), nil
}

func withNS(ns byte, parts ...[]byte) []byte {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 1, n)
	b[0] = ns
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func metaKey(sub byte, rest ...[]byte) []byte {
	return withNS(nsMeta, append([][]byte{{sub}}, rest...)...)
}

func offsetKey(topic string, partition int32) []byte {
	b := metaKey(metaOffset, []byte(topic), []byte{0})
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

func parseOffsetKey(k []byte) (topic string, partition int32, err error) {
	if len(k) < 2+1+4 {
		return "", 0, errBadKey
	}
	body := k[2:]
	return string(body[:len(body)-5]), int32(binary.BigEndian.Uint32(body[len(body)-4:])), nil
}

// putTime encodes an int64 so that byte order is numeric order.
func putTime(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

func getTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// escape appends k so that the result preserves byte order and no escaped
// key is a prefix of another: 0x00 becomes 0x00 0xff, and 0x00 0x01 ends it.
func escape(dst, k []byte) []byte {
	for _, c := range k {
		if c == 0 {
			dst = append(dst, 0, 0xff)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0, 1)
}

// unescape reads an escaped key from the front of b and returns it and the
// rest of b.
func unescape(b []byte) (key, rest []byte, err error) {
	key = make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			key = append(key, b[i])
			continue
		}
		if i+1 >= len(b) {
			return nil, nil, errBadKey
		}
		switch b[i+1] {
		case 0xff:
			key = append(key, 0)
			i++
		case 1:
			return key, b[i+2:], nil
		default:
			return nil, nil, errBadKey
		}
	}
	return nil, nil, errBadKey
}

// suffixTime returns the time a window or session suffix is indexed by:
// the window start, or the session end.
func suffixTime(kind store.Kind, suffix []byte) (int64, error) {
	switch kind {
	case store.KindWindow:
		if len(suffix) < 2+8 {
			return 0, fmt.Errorf("%w: window suffix of %d bytes", errBadKey, len(suffix))
		}
		return getTime(suffix[len(suffix)-8:]), nil
	case store.KindSession:
		if len(suffix) < 2+16 {
			return 0, fmt.Errorf("%w: session suffix of %d bytes", errBadKey, len(suffix))
		}
		return getTime(suffix[len(suffix)-16:]), nil
	}
	return 0, nil
}

// prefixEnd returns the smallest key greater than every key with prefix p.
// rangePrefix is the longest prefix of lo that every key in [lo, hi) has,
// at least base (the store's prefix, which lo starts with; hi nil: no
// bound). It is the Prefix of a range scan's Badger iterator because the
// iterator reads ahead past the last key the scan takes (two live keys,
// stepping over every deleted one on the way) until its Prefix ends: a
// store used as a queue (a suppress buffer's time index, an outer join's
// unjoined records) keeps its deletes as tombstones until compaction, and a
// read-ahead into the store's other regions stepped over all of them at
// every scan.
func rangePrefix(base, lo, hi []byte) []byte {
	p := base
	for n := len(base) + 1; hi != nil && n <= len(lo); n++ {
		e := prefixEnd(lo[:n])
		if e == nil || bytes.Compare(hi, e) > 0 {
			break
		}
		p = lo[:n]
	}
	return p
}

func prefixEnd(p []byte) []byte {
	e := append([]byte(nil), p...)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] < 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}
