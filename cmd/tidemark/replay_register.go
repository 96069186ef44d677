package main

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/store"
)

// registerReplayed registers each replayed store partition, so that
// tidemark state lists and reads it. Its kind is the one its records
// carry. A partition whose changelog holds input-position records only
// (every commit writes one into each logged store's changelog, so a store
// partition that was never written has them) carries no kind: it takes
// the kind another partition of the same store showed, or the one the
// directory already records for the store. Before, such a partition was
// left unregistered: its restored position sat in the directory while
// tidemark state said the store partition did not exist.
//
// unknown names the partitions read but left unregistered because no
// partition of their store said its kind; a changelog with no records
// at all says nothing and is skipped silently.
func registerReplayed(db *changelog.DB, targets []changelog.RestoreTarget, res changelog.RestoreResult) (unknown []string, err error) {
	kinds := map[string]store.Kind{}
	for _, t := range targets {
		if k := res.Kinds[changelog.TopicPartition{Topic: t.Topic, Partition: t.Partition}]; k != 0 {
			kinds[t.Store] = k
		}
	}
	present, err := db.Stores()
	if err != nil {
		return nil, err
	}
	for _, s := range present {
		if _, ok := kinds[s.Name]; !ok && s.Kind != 0 {
			kinds[s.Name] = s.Kind
		}
	}
	for _, t := range targets {
		tp := changelog.TopicPartition{Topic: t.Topic, Partition: t.Partition}
		kind := res.Kinds[tp]
		if kind == 0 {
			if res.Offsets[tp] == 0 {
				continue // an empty changelog says nothing about its store
			}
			if kind = kinds[t.Store]; kind == 0 {
				unknown = append(unknown, fmt.Sprintf("%s partition %d", t.Store, t.Partition))
				continue
			}
		}
		if err := db.Register(changelog.StoreInstance{Name: t.Store, Partition: t.Partition, Kind: kind, Topic: t.Topic}); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}
