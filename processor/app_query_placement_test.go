package processor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestQueryFindsKeysOfAPlacedStore counts "<tenant>:<item>" values
// through a GroupBy placed by tenant (6 partitions, 0 and 1 dedicated to
// the hot tenant "flash") in an App with two threads. Every key's count
// must be found where the placement put it: the other tenants' without
// naming the tenant, the hot tenant's with ForTenant (and ?tenant= over
// HTTP). Looked up by the default partitioner, most keys were reported
// absent.
func TestQueryFindsKeysOfAPlacedStore(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 2)
	out := kafkatestNewTopic(t, 6)
	appID := kafkatestName(t, "placedq")
	hot := topology.NewTenantPlacement(map[string][]int32{"flash": {0, 1}})
	tenantOf := func(_, v string) string { return strings.SplitN(v, ":", 2)[0] }
	b := topology.NewBuilder(appID)
	b.Stream(in, serde.String(), serde.String(), topology.WithTenant(tenantOf)).
		GroupBy(func(_, v string) string { return v }, serde.String(), topology.Named("by-item"),
			topology.WithPartitions(6), topology.WithPlacement(hot)).
		Count(topology.Named("cnt")).ToStream().To(out, topology.WithPlacement(hot))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	var recs []*kgo.Record
	for i := range 300 {
		v := fmt.Sprintf("%s:item%d", []string{"flash", "acme", "globex"}[i%3], i%10)
		want[v]++
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(v), Partition: int32(i % 2)})
	}
	kafkatest.Produce(t, recs...)
	app, _ := runApp(t, topo, processor.WithThreads(2), processor.WithHTTP("127.0.0.1:0"))
	kafkatest.ConsumeExactly(t, out, 300, time.Minute, time.Second)

	for k, n := range want {
		tenant := tenantOf("", k)
		var opts []processor.QueryOption
		if tenant == "flash" {
			opts = append(opts, processor.ForTenant(tenant))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := app.Get(ctx, "cnt", []byte(k), opts...)
		cancel()
		if err != nil || !res.Found {
			t.Fatalf("Get %s (tenant %s): found %v, partition %d, err %v; want count %d", k, tenant, res.Found, res.Partition, err, n)
		}
		v := res.Entries[0].Value
		if got := int(binary.BigEndian.Uint64(v[len(v)-8:])); got != n {
			t.Fatalf("Get %s: count %d, want %d", k, got, n)
		}
		if dedicated := res.Partition == 0 || res.Partition == 1; dedicated != (tenant == "flash") {
			t.Fatalf("Get %s (tenant %s) answered from partition %d", k, tenant, res.Partition)
		}
	}
	var got struct {
		Partition int32 `json:"partition"`
	}
	getJSON(t, "http://"+app.HTTPAddr()+"/stores/cnt/keys/"+url.PathEscape("flash:item3")+"?tenant=flash", &got)
	if got.Partition != 0 && got.Partition != 1 {
		t.Fatalf("GET flash:item3?tenant=flash: partition %d", got.Partition)
	}
}
