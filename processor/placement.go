package processor

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/topology"
)

// TenantPartitioner is a franz-go partitioner that places records like
// topology.WithPlacement(p) does in a sink: a record of a hot tenant goes to
// one of the tenant's dedicated partitions, any other record to the
// partitions no hot tenant owns, by murmur2 of the key bytes within the
// set (a null key to the set's first partition). Use it in the producers
// that write an application's input topics (kgo.RecordPartitioner), so a
// hot tenant's records reach their own partitions, and therefore their
// own tasks, from the first hop; and give every input of a join the same
// placement (see topology.TenantPlacement for the co-partitioning rule).
//
// tenantOf names a record's tenant the way the source's WithTenant
// function will (from a header, the key, or the value) and must agree with
// it, or records reach tasks by a tenant the application does not see.
// It returns an error for a malformed placement. A topic whose partition
// count does not fit the placement (a dedicated partition beyond it, or no
// shared partition left) fails each of its records: franz-go reports
// "invalid record partitioning choice" through the produce promise, rather
// than the record being placed somewhere the application does not expect.
// Partitioning is consistent: a record waits for its partition when that
// partition is unavailable, it is never moved to another.
func TenantPartitioner(p *topology.TenantPlacement, tenantOf func(*kgo.Record) string) (kgo.Partitioner, error) {
	if p == nil || tenantOf == nil {
		return nil, fmt.Errorf("processor: TenantPartitioner needs a placement and a tenant function")
	}
	if err := p.Err(); err != nil {
		return nil, fmt.Errorf("processor: TenantPartitioner: %w", err)
	}
	return tenantPartitioner{p: p, tenantOf: tenantOf}, nil
}

type tenantPartitioner struct {
	p        *topology.TenantPlacement
	tenantOf func(*kgo.Record) string
}

func (tp tenantPartitioner) ForTopic(string) kgo.TopicPartitioner { return tp }

func (tenantPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (tp tenantPartitioner) Partition(r *kgo.Record, n int) int {
	q, err := tp.p.Partition(tp.tenantOf(r), r.Key, int32(n))
	if err != nil {
		return -1 // franz-go fails the record with "invalid record partitioning choice"
	}
	return int(q)
}
