package processor

import (
	"fmt"
	"math"
	"strings"

	"github.com/tidemark-streams/tidemark/topology"
)

// offsetMetaBrokerDefault is the broker's default offset.metadata.max.bytes.
// A commit whose metadata is longer is refused (OFFSET_METADATA_TOO_LARGE):
// the transaction aborts, the task restarts from the same offsets and the
// next commit is refused again, without end.
const offsetMetaBrokerDefault = 4096

// checkOffsetMetaFits fails when the offset metadata a task of topo may
// commit (app_offsetmeta.go) can be over max bytes, so that such
// a topology is refused by NewApp, naming the sub-topology, rather than
// aborting every transaction at run time. It encodes the worst case: every
// clock an operator of the sub-topology may keep (a windowed or suppressing
// operator's store name, a suppression's held clock, a stream-stream
// join's name; every processor's name stands in for the last) and every
// logged store's position, each at the largest value.
func checkOffsetMetaFits(topo *topology.Topology, max int) error {
	logged := map[string]bool{}
	for _, info := range topo.Stores() {
		logged[info.Spec.Name] = info.Changelog != ""
	}
	for _, st := range topo.Describe().SubTopologies {
		m := offsetMeta{inputTime: math.MaxInt64, ops: map[string]int64{}, logs: map[string]int64{}}
		// Distinct values, so that deflating them gains no more than it can
		// on real clocks and offsets.
		v := int64(math.MaxInt64)
		next := func() int64 { v -= 1_000_000_007; return v }
		for _, n := range st.Nodes {
			if n.Kind != topology.KindProcessor {
				continue
			}
			m.ops[n.Name] = next()
			for _, s := range n.Stores {
				m.ops[s] = next()
				if strings.Contains(n.Operator, "SUPPRESS") {
					m.ops[s+"/held"] = next() // topology's suppressHeldClock
				}
				if logged[s] {
					m.logs[s] = next()
				}
			}
		}
		if size := len(m.encode()); size > max {
			return fmt.Errorf("sub-topology %d: its offset commit metadata (every operator clock and logged store position, by name) can take %d bytes, over the brokers' offset.metadata.max.bytes (%d; Config.OffsetMetadataMaxBytes), which would refuse every commit: give its operators and stores shorter names (Named), split it into fewer stateful operators per sub-topology (Repartition), or raise the brokers' limit and OffsetMetadataMaxBytes with it",
				st.ID, size, max)
		}
	}
	return nil
}
