package processor

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// HTTP answers keep binary keys apart: a key that does not read as text
// is base64 with key_encoding, as values are. Written raw, JSON turned
// the invalid bytes into U+FFFD, and Int64 keys 200 and 201 read alike.
func TestEntryEncodesBinaryKeysAndValues(t *testing.T) {
	t.Parallel()
	info := topology.StoreInfo{Spec: store.Spec{Kind: store.KindKeyValue}}
	key := func(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }
	var seen []string
	for _, n := range []int64{200, 201} {
		b, err := json.Marshal(encodeEntry(KV{Key: key(n), Value: key(n * 2)}, info))
		if err != nil {
			t.Fatal(err)
		}
		var e entryJSON
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		got, err := base64.StdEncoding.DecodeString(e.Key)
		if e.KeyEncoding != "base64" || err != nil || string(got) != string(key(n)) {
			t.Errorf("key %d: %s, want its 8 bytes in base64 with key_encoding", n, b)
		}
		if e.Encoding != "base64" {
			t.Errorf("value of key %d: %s, want base64", n, b)
		}
		seen = append(seen, e.Key)
	}
	if seen[0] == seen[1] {
		t.Errorf("keys 200 and 201 read alike: %v", seen)
	}
	b, _ := json.Marshal(encodeEntry(KV{Key: []byte("sku-1"), Value: []byte("in stock")}, info))
	if want := `{"key":"sku-1","value":"in stock","encoding":"utf8"}`; string(b) != want {
		t.Errorf("text entry %s, want %s", b, want)
	}
}
