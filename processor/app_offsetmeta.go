package processor

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// Each commit stores, with every input partition's offset (offset commit
// metadata, inside the transaction), what a task needs to resume exactly
// where the commit left it, on whichever instance gets it next:
//
//   - its clocks (Clocks: input stream times, windowed operators' stream
//     times), as Kafka Streams keeps its partition time. Without them a
//     restarted task would start at -1 and accept a record its predecessor
//     had found late, so a crash would change windowed results;
//   - the changelog position of each of its logged stores: the offset after
//     the last changelog record the committed transactions wrote. A new
//     owner's restore must reach it, whatever the last stable offset says:
//     a transaction left open by a member that died pins the last stable
//     offset below records other members committed later, and state
//     restored only to there would be older than the committed input
//     offsets it resumes from.
//
// Every input partition of a task carries all of it. A commit rewrites only
// the partitions whose offsets advanced, and clocks and positions only
// grow, so the largest value over the partitions is the latest.

const offsetMetaPrefix = "tidemark/1?"

// offsetMetaDeflatedPrefix starts the compressed form of the metadata: the
// same query, deflated and base64url-encoded. The broker refuses an offset
// commit whose metadata is over offset.metadata.max.bytes (4096 by
// default), and the plain form names every operator clock and logged
// store of the task: with a dozen or more windowed operators of
// descriptive names it is over, and every transaction aborted
// (OFFSET_METADATA_TOO_LARGE) while the task restarted without end. The
// names repeat (a store and its clock, a store and its -EMIT-CURSOR), so
// they deflate well.
const offsetMetaDeflatedPrefix = "tidemark/1z?"

// offsetMetaPlainMax is the longest metadata written in the plain form.
const offsetMetaPlainMax = 1024

// offsetMetaInflatedMax bounds what decoding the compressed form inflates.
const offsetMetaInflatedMax = 1 << 20

// offsetMeta is what one input partition's committed offset carries.
type offsetMeta struct {
	inputTime int64            // stream time of this input, -1 unknown
	ops       map[string]int64 // operator clocks by name
	logs      map[string]int64 // changelog positions by store name
}

func (m offsetMeta) encode() string {
	v := url.Values{}
	if m.inputTime >= 0 {
		v.Set("st", strconv.FormatInt(m.inputTime, 10))
	}
	for name, c := range m.ops {
		v.Set("c."+name, strconv.FormatInt(c, 10))
	}
	for name, off := range m.logs {
		v.Set("l."+name, strconv.FormatInt(off, 10))
	}
	q := v.Encode()
	if len(offsetMetaPrefix)+len(q) <= offsetMetaPlainMax {
		return offsetMetaPrefix + q
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	if err == nil {
		_, err = w.Write([]byte(q))
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil { // writing to a bytes.Buffer does not fail
		return offsetMetaPrefix + q
	}
	z := offsetMetaDeflatedPrefix + base64.RawURLEncoding.EncodeToString(buf.Bytes())
	if len(z) >= len(offsetMetaPrefix)+len(q) {
		return offsetMetaPrefix + q
	}
	return z
}

// inflateOffsetMeta returns the query of metadata in the compressed form.
func inflateOffsetMeta(z string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(z)
	if err != nil {
		return "", false
	}
	q, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(b)), offsetMetaInflatedMax+1))
	if err != nil || len(q) > offsetMetaInflatedMax {
		return "", false
	}
	return string(q), true
}

// decodeOffsetMeta reads encode's form; anything else (another client's
// metadata, none) holds nothing.
func decodeOffsetMeta(md string) (offsetMeta, bool) {
	q, found := strings.CutPrefix(md, offsetMetaPrefix)
	if !found {
		z, deflated := strings.CutPrefix(md, offsetMetaDeflatedPrefix)
		if !deflated {
			return offsetMeta{inputTime: -1}, false
		}
		if q, found = inflateOffsetMeta(z); !found {
			return offsetMeta{inputTime: -1}, false
		}
	}
	v, err := url.ParseQuery(q)
	if err != nil {
		return offsetMeta{inputTime: -1}, false
	}
	m := offsetMeta{inputTime: -1, ops: map[string]int64{}, logs: map[string]int64{}}
	for k, vals := range v {
		n, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil || n < 0 {
			continue
		}
		switch {
		case k == "st":
			m.inputTime = n
		case strings.HasPrefix(k, "c."):
			m.ops[k[2:]] = n
		case strings.HasPrefix(k, "l."):
			m.logs[k[2:]] = n
		}
	}
	return m, true
}

// resumePoint is where a task resumes: its clocks, and the changelog
// positions its restore must reach.
type resumePoint struct {
	clocks task.Clocks
	logs   map[string]int64 // by store name
}

// nextResume is where the task resumes after the commit being prepared:
// its clocks, and its changelog positions advanced by the records just
// flushed (offsets). md stores it with the offsets of the task's inputs.
func (lt *liveTask) nextResume(flushed changelog.ChangelogOffsets) (resumePoint, txn.Metadata) {
	id := lt.task.ID()
	rp := resumePoint{clocks: lt.task.Clocks(), logs: map[string]int64{}}
	// Only the task's own stores' positions carry over: the resume point
	// also holds those an older version of the topology committed for
	// stores it no longer has (removed, renamed), which no restore reads,
	// and carried on they would pile up, commit after commit and upgrade
	// after upgrade, toward the broker's metadata limit.
	for _, st := range lt.task.Stores() {
		if off, ok := lt.resume.logs[st.Spec.Name]; ok {
			rp.logs[st.Spec.Name] = off
		}
	}
	for _, st := range lt.task.Stores() {
		tp := changelog.TopicPartition{Topic: changelog.TopicName(lt.app, st.Spec.Name), Partition: id.Partition}
		if off, ok := flushed[tp]; ok {
			rp.logs[st.Spec.Name] = max(rp.logs[st.Spec.Name], off)
		}
	}
	md := txn.Metadata{}
	for _, topic := range lt.task.Topics() {
		st, ok := rp.clocks.Inputs[topic]
		if !ok {
			st = -1
		}
		md.Set(topic, id.Partition, offsetMeta{inputTime: st, ops: rp.clocks.Operators, logs: rp.logs}.encode())
	}
	return rp, md
}

// committedMetadata reads the metadata of the group's committed offsets,
// stable ones: while a transaction that commits offsets of the group is
// still open the broker answers UNSTABLE_OFFSET_COMMIT, and this waits,
// fencing the transactions of departed members (one that died between its
// offset commit and EndTxn would otherwise hold it until it times out).
func (s *session) committedMetadata(ctx context.Context, parts txn.Partitions) (map[changelog.TopicPartition]string, error) {
	var lastFence time.Time
	var md map[string]map[int32]string
	err := retry.Do(ctx, s.app.log, "fetch committed offsets", func(ctx context.Context) error {
		var err error
		md, err = txn.CommittedMetadata(ctx, s.cl, s.app.topo.Application(), parts)
		if err != nil && errors.Is(err, kerr.UnstableOffsetCommit) && time.Since(lastFence) > time.Second {
			lastFence = time.Now()
			if ferr := s.fenceDeparted(ctx); ferr != nil {
				s.app.log.Warn("could not check for transactions of departed members", "err", ferr)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[changelog.TopicPartition]string{}
	for topic, ps := range md {
		for p, m := range ps {
			out[changelog.TopicPartition{Topic: topic, Partition: p}] = m
		}
	}
	return out, nil
}

// resumeState is where task id resumes, out of the committed metadata of
// its input partitions: the largest of each clock and position.
func (s *session) resumeState(meta map[changelog.TopicPartition]string, id topology.TaskID) resumePoint {
	rp := resumePoint{clocks: task.Clocks{Inputs: map[string]int64{}, Operators: map[string]int64{}}, logs: map[string]int64{}}
	for _, topic := range s.app.topo.SubTopologies()[id.SubTopology].SourceTopics {
		m, ok := decodeOffsetMeta(meta[changelog.TopicPartition{Topic: topic, Partition: id.Partition}])
		if !ok {
			continue
		}
		if m.inputTime >= 0 {
			rp.clocks.Inputs[topic] = m.inputTime
		}
		for name, v := range m.ops {
			rp.clocks.Operators[name] = max(rp.clocks.Operators[name], v)
		}
		for name, v := range m.logs {
			rp.logs[name] = max(rp.logs[name], v)
		}
	}
	return rp
}
