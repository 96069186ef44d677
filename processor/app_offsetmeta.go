package processor

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// A task's clocks (Clocks: input stream times, windowed operators' stream
// times) survive restarts and aborts, as Kafka Streams keeps its partition
// time: each commit stores them with every input partition's offset
// (offset commit metadata, inside the transaction), and a task resumes
// from them. Without it a restarted task would start at -1 and accept a
// record its predecessor had found late, so a crash would change windowed
// results.
//
// Every input partition of a task carries all its operator clocks. A commit
// rewrites only the partitions whose offsets advanced, and clocks only move
// with records, so the largest value over the partitions is the latest.

const clockMetadataPrefix = "tidemark/1?"

func encodeClocks(inputTime int64, ops map[string]int64) string {
	v := url.Values{}
	if inputTime >= 0 {
		v.Set("st", strconv.FormatInt(inputTime, 10))
	}
	for name, c := range ops {
		v.Set("c."+name, strconv.FormatInt(c, 10))
	}
	return clockMetadataPrefix + v.Encode()
}

// decodeClocks reads encodeClocks's form; anything else (another client's
// metadata, none) holds no clocks.
func decodeClocks(md string) (inputTime int64, ops map[string]int64, ok bool) {
	q, found := strings.CutPrefix(md, clockMetadataPrefix)
	if !found {
		return -1, nil, false
	}
	v, err := url.ParseQuery(q)
	if err != nil {
		return -1, nil, false
	}
	inputTime, ops = -1, map[string]int64{}
	for k, vals := range v {
		n, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil || n < 0 {
			continue
		}
		if k == "st" {
			inputTime = n
		} else if name, ok := strings.CutPrefix(k, "c."); ok {
			ops[name] = n
		}
	}
	return inputTime, ops, true
}

// clockSnapshot takes every task's clocks for the commit about to run, and
// the offset metadata that stores them.
func (s *session) clockSnapshot() (map[topology.TaskID]Clocks, map[topicPartition]string) {
	byTask := map[topology.TaskID]Clocks{}
	meta := map[topicPartition]string{}
	for id, lt := range s.tasks {
		c := lt.task.Clocks()
		byTask[id] = c
		for _, topic := range lt.task.Topics() {
			st, ok := c.Inputs[topic]
			if !ok {
				st = -1
			}
			meta[topicPartition{topic, id.Partition}] = encodeClocks(st, c.Operators)
		}
	}
	return byTask, meta
}

// withClocks makes the commit under ctx store meta with the offsets.
func withClocks(ctx context.Context, meta map[topicPartition]string) context.Context {
	return txn.WithOffsetMetadata(ctx, func(topic string, partition int32) (string, bool) {
		md, ok := meta[topicPartition{topic, partition}]
		return md, ok
	})
}

// committedMetadata reads the metadata of the group's committed offsets.
func (s *session) committedMetadata(ctx context.Context) (map[topicPartition]string, error) {
	md, err := txn.CommittedMetadata(ctx, s.cl, s.app.topo.Application())
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]string{}
	for topic, ps := range md {
		for p, m := range ps {
			out[topicPartition{topic, p}] = m
		}
	}
	return out, nil
}

// resumeClocks are the clocks task id resumes from, out of the committed
// metadata of its input partitions.
func (s *session) resumeClocks(meta map[topicPartition]string, id topology.TaskID) Clocks {
	c := Clocks{Inputs: map[string]int64{}, Operators: map[string]int64{}}
	for _, topic := range s.app.topo.SubTopologies()[id.SubTopology].SourceTopics {
		st, ops, ok := decodeClocks(meta[topicPartition{topic, id.Partition}])
		if !ok {
			continue
		}
		if st >= 0 {
			c.Inputs[topic] = st
		}
		for name, v := range ops {
			c.Operators[name] = max(c.Operators[name], v)
		}
	}
	return c
}
