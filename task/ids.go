package task

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/topology"
)

// IDs lists the tasks a topology needs, by sub-topology then partition:
// one per partition of each sub-topology's inputs. Inputs of one
// sub-topology with different partition counts are allowed (the task count
// is the largest), except where CheckCopartitioning forbids it, which this
// checks first. The runtime assigns these tasks to group members; the test
// driver creates all of them.
func IDs(topo *topology.Topology, partitions func(topic string) (int32, bool)) ([]topology.TaskID, error) {
	if err := topo.CheckCopartitioning(partitions); err != nil {
		return nil, err
	}
	var ids []topology.TaskID
	for _, st := range topo.SubTopologies() {
		var n int32
		for _, topic := range st.SourceTopics {
			c, ok := partitions(topic)
			if !ok {
				return nil, fmt.Errorf("task: partition count of %q (sub-topology %d) unknown", topic, st.ID)
			}
			n = max(n, c)
		}
		for p := int32(0); p < n; p++ {
			ids = append(ids, topology.TaskID{SubTopology: st.ID, Partition: p})
		}
	}
	return ids, nil
}
