package processor_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestRangeSaysWhenNoThreadIsAssigned: a query over every local partition
// must not answer "no keys" for partitions it cannot see. Once the App has
// stopped (its sessions withdrew their tasks, as a restarting session
// does), Range answered an empty success; before Run it says ErrNoOwner,
// and so must it after.
func TestRangeSaysWhenNoThreadIsAssigned(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "iq-stopped"), in, out)
	want := produceKeysN(t, in, 0, 40, 8, 2)
	app, stop := runApp(t, topo)
	if _, err := app.Range(context.Background(), "counts", nil, nil, 0); !errors.Is(err, processor.ErrNoOwner) {
		t.Logf("Range right after Run started: %v (the first assignment may be in already)", err)
	}
	checkCounts(t, out, want)
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := app.Range(context.Background(), "counts", nil, nil, 0)
		if err == nil && len(res.Entries) == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Range while running: %d entries, err %v; want %d keys", len(res.Entries), err, len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	res, err := app.Range(context.Background(), "counts", nil, nil, 0)
	if !errors.Is(err, processor.ErrNoOwner) {
		t.Errorf("Range of a stopped app: %d entries, partitions %v, err %v; want ErrNoOwner", len(res.Entries), res.Partitions, err)
	}
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()
	if a := httpGet(t, srv.URL+"/stores/counts/range"); a.status != http.StatusServiceUnavailable {
		t.Errorf("GET /stores/counts/range of a stopped app: %d %s; want 503", a.status, a.body)
	}
}

// TestGetOfAStoppedAppSaysItIsNotRunning: a key query of an App whose Run
// has returned found no local partition and asked the group for the
// owner with the App's closed client, so it failed with "describe group
// …: client closed", which reads like a broker fault. It must say the app
// is not running (ErrNoOwner, 503), as it does before Run.
func TestGetOfAStoppedAppSaysItIsNotRunning(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "iq-stopped-get"), in, out)
	want := produceKeysN(t, in, 0, 40, 8, 2)
	app, stop := runApp(t, topo)
	checkCounts(t, out, want)
	stop()
	_, err := app.Get(context.Background(), "counts", []byte("sku-01"))
	if !errors.Is(err, processor.ErrNoOwner) || !strings.Contains(err.Error(), "not running") || strings.Contains(err.Error(), "client closed") {
		t.Errorf("Get of a stopped app: %v; want ErrNoOwner saying the app is not running", err)
	}
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()
	a := httpGet(t, srv.URL+"/stores/counts/keys/sku-01")
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "not running") {
		t.Errorf("GET /stores/counts/keys/sku-01 of a stopped app: %d %s; want 503 saying the app is not running", a.status, a.body)
	}
}
