package processor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestQueryOfAStoreBehindACustomPartitioner counts items through a
// GroupBy whose repartition topic a WithPartitioner writes (item<d> to
// partition d mod 4): a key's partition is not the default partitioner's,
// and the query cannot compute it (the partitioner takes typed keys and
// values). A Get that looked where the default partitioner puts the key
// answered most keys "not found" without an error. It must say the
// partition is needed (ErrPartitionUnknown, 400 over HTTP), and find every
// key with InPartition (?partition= over HTTP).
func TestQueryOfAStoreBehindACustomPartitioner(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 4, nil)
	part := func(_ string, k, _ string, n int32) int32 { return int32(k[len(k)-1]-'0') % n }
	b := topology.NewBuilder(kafkatest.UniqueName(t, "iq-partitioner"))
	b.Stream(in, serde.String(), serde.String()).
		GroupBy(func(_, v string) string { return v }, serde.String(), topology.Named("by-item"),
			topology.WithPartitions(4), topology.WithPartitioner(part)).
		Count(topology.Named("cnt")).ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	var recs []*kgo.Record
	for i := range 100 {
		v := fmt.Sprintf("item%d", i%10)
		want[v]++
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(v)})
	}
	kafkatest.Produce(t, recs...)
	app, _ := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))
	kafkatest.ConsumeExactly(t, out, 100, time.Minute, time.Second)
	base := waitReady(t, app)

	ctx := context.Background()
	for k, n := range want {
		p := part("", k, "", 4)
		res, err := app.Get(ctx, "cnt", []byte(k))
		if !errors.Is(err, processor.ErrPartitionUnknown) {
			t.Errorf("Get %s without its partition: found %v in partition %d, err %v; want ErrPartitionUnknown", k, res.Found, res.Partition, err)
		}
		res, err = app.Get(ctx, "cnt", []byte(k), processor.InPartition(p))
		if err != nil || !res.Found || res.Partition != p {
			t.Fatalf("Get %s in partition %d: found %v in partition %d, err %v", k, p, res.Found, res.Partition, err)
		}
		v := res.Entries[0].Value
		if got := int(binary.BigEndian.Uint64(v[len(v)-8:])); got != n {
			t.Fatalf("Get %s: count %d, want %d", k, got, n)
		}
		status, ans := ask(t, fmt.Sprintf("%s/stores/cnt/keys/%s?partition=%d", base, k, p))
		if status != http.StatusOK || ans.count(t) != int64(n) || ans.Partition == nil || *ans.Partition != p {
			t.Fatalf("GET %s?partition=%d: %d %+v", k, p, status, ans)
		}
	}
	for path, code := range map[string]int{
		"/stores/cnt/keys/item1":             http.StatusBadRequest, // the partition is needed
		"/stores/cnt/keys/item1?partition=4": http.StatusBadRequest, // out of range
		"/stores/cnt/keys/item1?partition=x": http.StatusBadRequest,
	} {
		if status, ans := ask(t, base+path); status != code || ans.Error == "" {
			t.Errorf("GET %s: %d %+v, want %d", path, status, ans, code)
		}
	}
}
