package processor_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

type httpAnswer struct {
	status   int
	location string
	body     []byte
}

func httpGet(t *testing.T, url string) httpAnswer {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return httpAnswer{resp.StatusCode, resp.Header.Get("Location"), b}
}

type queryEntry struct{ Key, Value, Encoding string }

// count decodes a count from a query entry (the store holds big-endian
// int64s, served base64).
func (e queryEntry) count(t *testing.T) int64 {
	t.Helper()
	b := []byte(e.Value)
	if e.Encoding == "base64" {
		var err error
		if b, err = base64.StdEncoding.DecodeString(e.Value); err != nil {
			t.Fatal(err)
		}
	}
	if len(b) != 8 {
		t.Fatalf("entry %+v is not a count", e)
	}
	return int64(binary.BigEndian.Uint64(b))
}

// TestInteractiveQueriesAcrossTwoInstances runs two instances of a count
// and asks each for every key: the owner answers with the committed count,
// the other redirects (421) to the owner's instance and advertised
// address, which must be the address its server is bound to.
func TestInteractiveQueriesAcrossTwoInstances(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 4, nil), kafkatest.NewTopic(t, 4, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "iq"), in, out)
	want := produceKeysN(t, in, 0, 400, 16, 4)
	apps := map[string]*processor.App{}
	for _, id := range []string{"east", "west"} {
		apps[id], _ = runApp(t, topo, processor.WithInstanceID(id), processor.WithStateDir(t.TempDir()),
			processor.WithHTTP("127.0.0.1:0"))
	}
	checkCounts(t, out, want)

	// Partitions settle on both instances (two cooperative rounds), then
	// every key has one owner that serves it and one redirect to it.
	var owned map[string][]string // instance -> keys it serves
	deadline := time.Now().Add(15 * time.Second)
	for {
		owned = map[string][]string{}
		problem := ""
		for id, app := range apps {
			if app.HTTPAddr() == "" {
				problem = id + " is not listening yet"
			}
		}
		for key, n := range want {
			if problem != "" {
				break
			}
			served := 0
			for id, app := range apps {
				other := "east"
				if id == "east" {
					other = "west"
				}
				base := "http://" + app.HTTPAddr()
				a := httpGet(t, base+"/stores/counts/keys/"+key)
				switch a.status {
				case http.StatusOK:
					var e queryEntry
					if err := json.Unmarshal(a.body, &e); err != nil {
						t.Fatal(err)
					}
					if got := e.count(t); got != int64(n) {
						t.Fatalf("%s serves %s = %d, want the committed count %d", id, key, got, n)
					}
					served++
					owned[id] = append(owned[id], key)
				case http.StatusMisdirectedRequest:
					var redirect struct {
						Owner     string `json:"owner"`
						OwnerHTTP string `json:"owner_http"`
					}
					if err := json.Unmarshal(a.body, &redirect); err != nil {
						t.Fatal(err)
					}
					ownerAddr := apps[other].HTTPAddr()
					if redirect.Owner != other || redirect.OwnerHTTP != ownerAddr ||
						a.location != "http://"+ownerAddr+"/stores/counts/keys/"+key {
						problem = fmt.Sprintf("%s redirects %s to %s at %s (Location %q); want %s at %s",
							id, key, redirect.Owner, redirect.OwnerHTTP, a.location, other, ownerAddr)
					}
				default:
					problem = fmt.Sprintf("%s answers %s with %d: %s", id, key, a.status, a.body)
				}
			}
			if served != 1 && problem == "" {
				problem = fmt.Sprintf("%s is served by %d instances", key, served)
			}
		}
		if problem == "" && len(owned["east"]) > 0 && len(owned["west"]) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queries did not settle in 15s: %s (served: %v)", problem, owned)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A range covers the instance's own partitions, and only them.
	for id, app := range apps {
		var r struct{ Entries []queryEntry }
		getJSON(t, "http://"+app.HTTPAddr()+"/stores/counts/range", &r)
		got := map[string]bool{}
		for _, e := range r.Entries {
			if e.count(t) != int64(want[e.Key]) {
				t.Fatalf("%s range: %s = %d, want %d", id, e.Key, e.count(t), want[e.Key])
			}
			got[e.Key] = true
		}
		if len(got) != len(owned[id]) {
			t.Fatalf("%s range has %d keys, it serves %d: %v", id, len(got), len(owned[id]), owned[id])
		}
		for _, k := range owned[id] {
			if !got[k] {
				t.Fatalf("%s range misses its key %s", id, k)
			}
		}
	}

	base := "http://" + apps["east"].HTTPAddr()
	for _, path := range []string{"/stores/nope/keys/sku-01", "/stores/nope/range"} {
		if a := httpGet(t, base+path); a.status != http.StatusNotFound {
			t.Fatalf("GET %s: %d %s, want 404 for an unknown store", path, a.status, a.body)
		}
	}
}
