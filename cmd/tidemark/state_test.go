package main

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/store"
)

// --timestamped decodes a DSL table's value after its 8-byte timestamp
// and prints the timestamp; without it the serde sees the prefix too.
func TestStateEntryTimestamped(t *testing.T) {
	js, err := stateCodecFor("json", "--value-serde")
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := stateCodecFor("string", "--key-serde")
	value := append(binary.BigEndian.AppendUint64(nil, 1_700_000_000_123), `{"sku":"a","qty":3}`...)
	e := changelog.Entry{Key: []byte("a"), Value: value}
	var b strings.Builder
	printStateEntry(&b, store.KindKeyValue, e, ks, js, true)
	if want := "\"a\"\t{\"qty\":3,\"sku\":\"a\"}\tts=1700000000123\n"; b.String() != want {
		t.Errorf("timestamped: %q, want %q", b.String(), want)
	}
	b.Reset()
	printStateEntry(&b, store.KindKeyValue, e, ks, js, false)
	if !strings.Contains(b.String(), "<undecodable") {
		t.Errorf("without --timestamped: %q, want the prefix to make the JSON undecodable", b.String())
	}
	b.Reset()
	printStateEntry(&b, store.KindKeyValue, changelog.Entry{Key: []byte("a"), Value: []byte{1, 2}}, ks, js, true)
	if !strings.Contains(b.String(), "<no timestamp 0x0102>") {
		t.Errorf("a value shorter than a timestamp: %q", b.String())
	}
}
