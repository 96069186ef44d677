package changelog

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs, the default snapshot store
	_ "gocloud.dev/blob/memblob"  // mem:// URLs, for tests
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
)

// Snapshots are the recovery point of a task that moves to an instance
// without local state for it: instead of replaying its changelogs from
// offset 0, the new owner loads the newest snapshot of the task's Badger
// DB from a blob store (a local or shared directory, S3, GCS) and replays
// only the changelog tail past the offsets the snapshot reflects.
//
// A snapshot is a Badger backup of one task DB: the whole DB (a full
// backup, seq 0, which starts a chain) or what changed since the previous
// snapshot of the chain (an incremental backup). Objects live under
//
//	<application>/<task>/<chain>/<seq>.backup
//	<application>/<task>/<chain>/<seq>.manifest.json
//
// A chain's name sorts by its start time, so the newest chain is the
// greatest; seq is zero-padded. The manifest is written after its backup,
// so a snapshot is complete exactly when its manifest exists; it names
// the backup's checksum and size, the Badger versions it covers and the
// changelog offsets and input position the state reflects.
//
// What a task DB holds is committed state: TaskState.Apply writes an
// overlay only after its transaction committed, in one Badger
// transaction with the changelog offsets it reflects (or, for an overlay
// too big for one, staged under a marker that a reopen completes or
// drops, exactly as after a crash). A backup is read at one Badger read
// timestamp (one stream goroutine, one read transaction), so it holds
// the state of some sequence of Applies together with the offsets of
// that same state: never an uncommitted write, never data ahead of or
// behind its offsets. A task DB being restored is not snapshotted.
//
// Incremental backups need every version written since the previous
// snapshot, deletes included: Badger's compaction may otherwise drop a
// delete marker (and the value it shadowed) when no older level holds
// the key, and a restore of the chain would then bring the deleted value
// back from an earlier backup. A snapshot therefore keeps a read
// transaction open on its task DB until the next one (the pin): Badger
// discards no version at or above a live read timestamp, and the next
// incremental backup starts at the pin's. The pin lives as long as the
// Badger DB it was taken on; a reopen or a new process starts a new chain
// with a full backup.

// snapshotFormat is the version of the manifest and object layout.
const snapshotFormat = 1

// Snapshot defaults.
const (
	DefaultSnapshotChainLength = 10
	DefaultSnapshotRetention   = 2
)

// SnapshotOptions configure a SnapshotStore. The zero value is valid.
type SnapshotOptions struct {
	// ChainLength is how many snapshots a chain holds (its full backup
	// included) before the next snapshot starts a new chain with a full
	// backup: a restore loads at most ChainLength objects. Default
	// DefaultSnapshotChainLength.
	ChainLength int
	// Retention is how many complete chains of a task are kept: older
	// ones are deleted once a new chain's full backup is complete.
	// Default DefaultSnapshotRetention; at least 1.
	Retention int
	// Concurrency bounds how many task DBs WriteSnapshots backs up at
	// once. Default 2.
	Concurrency int
	// Logger receives warnings (a damaged chain skipped, a failed
	// deletion); default slog.Default().
	Logger *slog.Logger
	// Pace, when set, throttles snapshot loads and writes (see
	// PaceFunc): it is called between the reads a load makes of a
	// backup and between the writes of a backup. A snapshot is work the
	// record loop never waits for, but on a small machine an unpaced one
	// takes the cores from it: on 2 cores, the first snapshots of two
	// tasks just moved here (full backups of 38 MB each) stalled the
	// instance's other tasks for ~300 ms.
	Pace PaceFunc
}

func (o *SnapshotOptions) ensureDefaults() {
	if o.ChainLength <= 0 {
		o.ChainLength = DefaultSnapshotChainLength
	}
	if o.Retention <= 0 {
		o.Retention = DefaultSnapshotRetention
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 2
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// SnapshotStore is where an application's task snapshots are written and
// loaded from: a gocloud.dev blob bucket, under a prefix named after the
// application. It is safe for concurrent use.
type SnapshotStore struct {
	bucket *blob.Bucket
	app    string
	opts   SnapshotOptions
	owned  bool // Close closes the bucket
}

// OpenSnapshotStore opens the bucket at url with blob.OpenBucket:
// file:///path (a local or mounted directory, created if missing) and
// mem:// are linked in; s3://bucket?region=... and gs://bucket need the
// driver's blank import (gocloud.dev/blob/s3blob, gocloud.dev/blob/gcsblob)
// in the program. Snapshots of application app are kept under "<app>/".
func OpenSnapshotStore(ctx context.Context, url, app string, opts SnapshotOptions) (*SnapshotStore, error) {
	if app == "" || strings.Contains(app, "/") {
		return nil, fmt.Errorf("changelog: snapshot store: application id %q: want a non-empty name without '/'", app)
	}
	if rest, ok := strings.CutPrefix(url, "file://"); ok {
		// fileblob refuses a missing directory unless asked to create it.
		url = withFileParam(url, rest, "create_dir")
		// fileblob writes each object to a temporary file and renames it
		// into place, by default in os.TempDir: where /tmp is another
		// file system than the store (a tmpfs /tmp, a mounted volume)
		// the rename fails with "invalid cross-device link" and no
		// snapshot is ever written, and a process killed mid-write
		// leaves its temporary file in /tmp for good. Next to the object
		// the rename stays within the store, and a chain's leftovers go
		// when the chain is pruned (deleteChain lists every object).
		url = withFileParam(url, rest, "no_tmp_dir")
	}
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("changelog: open snapshot store %s: %w", url, err)
	}
	s := NewSnapshotStore(b, app, opts)
	s.owned = true
	return s, nil
}

// withFileParam adds name=true to a file:// URL whose rest (the URL after
// the scheme) does not set name.
func withFileParam(url, rest, name string) string {
	if strings.Contains(rest, name+"=") {
		return url
	}
	if strings.Contains(url, "?") {
		return url + "&" + name + "=true"
	}
	return url + "?" + name + "=true"
}

// NewSnapshotStore uses an open bucket; Close leaves it open.
func NewSnapshotStore(b *blob.Bucket, app string, opts SnapshotOptions) *SnapshotStore {
	opts.ensureDefaults()
	return &SnapshotStore{bucket: b, app: app, opts: opts}
}

// Close closes the bucket if OpenSnapshotStore opened it.
func (s *SnapshotStore) Close() error {
	if !s.owned {
		return nil
	}
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("changelog: close snapshot store: %w", err)
	}
	return nil
}

// SnapshotManifest describes one snapshot; it is stored as JSON next to
// its backup.
type SnapshotManifest struct {
	Format      int    `json:"format"`     // snapshotFormat
	KeyFormat   int    `json:"key_format"` // the task DB's key format (formatVersion)
	Application string `json:"application"`
	// Fingerprint is the state layout of the topology that wrote the
	// snapshot (Owner.Fingerprint); a DB with another one does not load
	// it, as its stores may mean other things.
	Fingerprint string `json:"fingerprint,omitempty"`
	Task        string `json:"task"`
	Chain       string `json:"chain"`
	Seq         int    `json:"seq"`
	// Since and Until are the Badger versions the backup covers: every
	// version above Since (0 for a full backup) up to Until.
	Since uint64 `json:"since"`
	Until uint64 `json:"until"`
	// Offsets are the changelog offsets the state of the chain up to this
	// snapshot reflects (what a restore replays from); Position is its
	// input position.
	Offsets  []SnapshotOffset `json:"offsets"`
	Position InputPosition    `json:"position,omitempty"`
	Stores   []string         `json:"stores"`
	Bytes    int64            `json:"bytes"`
	Checksum string           `json:"checksum"` // "sha256:<hex>" of the backup object
	Created  time.Time        `json:"created"`
}

// SnapshotOffset is a changelog partition's next offset to read.
type SnapshotOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// ChangelogOffsets returns m's offsets as a map.
func (m *SnapshotManifest) ChangelogOffsets() ChangelogOffsets {
	out := ChangelogOffsets{}
	for _, o := range m.Offsets {
		out[TopicPartition{o.Topic, o.Partition}] = o.Offset
	}
	return out
}

func (s *SnapshotStore) taskPrefix(task string) string { return s.app + "/" + task + "/" }

func (s *SnapshotStore) objectKey(task, chain string, seq int, suffix string) string {
	return fmt.Sprintf("%s%s/%08d.%s", s.taskPrefix(task), chain, seq, suffix)
}

// newChainName sorts by creation time (and, within a nanosecond, by
// nothing: one process writes one task's chains one at a time).
func newChainName(now time.Time) string { return fmt.Sprintf("c%020d", now.UnixNano()) }

// snapState is the chain a process is writing for one task DB, and the
// pin that keeps the versions its next incremental backup needs.
type snapState struct {
	mu  sync.Mutex // held for a whole snapshot of the task
	bdb *badger.DB // the Badger DB the pin was taken on
	pin *badger.Txn
	// pinned is when pin was taken (the last snapshot that succeeded).
	pinned time.Time
	chain  string
	seq    int
	keys   snapKeys // the chain's offsets, positions and stores so far
}

// dropSnapshotPin ends tdb's snapshot chain: its pin is released before
// its Badger DB closes (a read transaction must not outlive it). The
// caller holds tdb exclusively (close, reopen).
func (tdb *taskDB) dropSnapshotPin() {
	st := tdb.snap
	if st == nil {
		return
	}
	tdb.snap = nil
	if st.pin != nil {
		st.pin.Discard()
		st.pin = nil
	}
}

// snapshotPinMaxAge is how long a snapshot chain's pin is kept while its
// snapshots fail (a variable for tests).
var snapshotPinMaxAge = 10 * time.Minute

// endChain releases st's pin after a failed snapshot: the next snapshot
// starts a new chain with a full backup. A pin kept across failures keeps
// Badger from discarding any version written since the last snapshot that
// succeeded: with the snapshot store unwritable for hours (a full disk,
// lost permissions, an object store outage) every overwrite and delete of
// the task's state stayed in its LSM tree, and the state directory grew
// without bound while the task kept processing. The caller holds st.mu.
func (st *snapState) endChain() {
	if st.pin != nil {
		st.pin.Discard()
	}
	st.pin, st.chain, st.seq, st.keys, st.pinned = nil, "", 0, snapKeys{}, time.Time{}
}

// snapState returns the snapshot chain state of tdb's current Badger
// DB, a new one when the DB was reopened since (a new DB starts a new
// chain).
func (tdb *taskDB) snapState() *snapState {
	tdb.db.mu.Lock()
	defer tdb.db.mu.Unlock()
	if tdb.snap == nil || tdb.snap.bdb != tdb.bdb {
		tdb.snap = &snapState{bdb: tdb.bdb}
	}
	return tdb.snap
}

// endChainAround runs drop, which removes data of tdb without writing
// delete markers (Badger's DropPrefix), and ends tdb's snapshot chain.
// An incremental backup holds the versions written since the previous
// snapshot: data dropped that way leaves nothing in it, and a load of the
// chain brought every dropped key back from its earlier backups. The
// chain is held while drop runs, so no snapshot reads the DB half-dropped
// or starts a chain before the drop that an incremental would continue
// after it.
func (tdb *taskDB) endChainAround(drop func() error) error {
	st := tdb.snapState()
	st.mu.Lock()
	defer st.mu.Unlock()
	defer st.endChain()
	return drop()
}

// SnapshotResult is what one task's snapshot wrote.
type SnapshotResult struct {
	Task     string
	Manifest SnapshotManifest
	// Skipped is set when the task DB had nothing new since its previous
	// snapshot (nothing was written).
	Skipped  bool
	Duration time.Duration
	// Pruned counts the old chains deleted after this snapshot.
	Pruned int
}

// WriteSnapshots writes a snapshot of every open task DB that changed
// since its previous snapshot, at most opts.Concurrency at a time, and
// returns what each wrote (skipped tasks included). A task DB being
// restored is left out. Call it off the record loop: it reads whole DBs.
// A failed task does not stop the others; the errors are joined.
func (db *DB) WriteSnapshots(ctx context.Context, s *SnapshotStore) ([]SnapshotResult, error) {
	return db.WriteSnapshotsOf(ctx, s, nil)
}

// WriteSnapshotsOf is WriteSnapshots for the open task DBs whose task id
// keep accepts (every one when keep is nil).
func (db *DB) WriteSnapshotsOf(ctx context.Context, s *SnapshotStore, keep func(task string) bool) ([]SnapshotResult, error) {
	tdbs, done, err := db.readers()
	if err != nil {
		return nil, fmt.Errorf("changelog: snapshot %s: %w", db.dir, err)
	}
	defer done()
	results := make([]SnapshotResult, len(tdbs))
	errs := make([]error, len(tdbs))
	var g errgroup.Group
	g.SetLimit(s.opts.Concurrency)
	for i, tdb := range tdbs {
		if tdb.id == "" {
			continue // a read-only directory of the old layout
		}
		if keep != nil && !keep(tdb.id) {
			continue
		}
		g.Go(func() error {
			results[i], errs[i] = db.snapshotTask(ctx, s, tdb)
			return nil
		})
	}
	_ = g.Wait()
	out := results[:0]
	for _, r := range results {
		if r.Task != "" {
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// snapshotTask writes one snapshot of tdb, which the caller holds as a
// reader.
func (db *DB) snapshotTask(ctx context.Context, s *SnapshotStore, tdb *taskDB) (res SnapshotResult, err error) {
	res.Task = tdb.id
	st := tdb.snapState()
	st.mu.Lock()
	defer st.mu.Unlock()
	bdb := st.bdb
	defer recoverRead(db.log, &tdb.closed, &err, nil)
	// A snapshot that failed with the pin older than snapshotPinMaxAge
	// ends the chain (see endChain). A younger pin is kept, so that a
	// blip of the store costs no full backup; a cancelled snapshot (the
	// session closing) leaves the chain for the next one to continue.
	defer func() {
		if err != nil && ctx.Err() == nil && st.pin != nil && time.Since(st.pinned) >= snapshotPinMaxAge {
			st.endChain()
		}
	}()

	start := time.Now()
	full := st.pin == nil || st.seq+1 >= s.opts.ChainLength
	if !full && !committedSince(bdb, st.pin.ReadTs()) {
		res.Skipped = true
		return res, nil
	}
	m := SnapshotManifest{Format: snapshotFormat, KeyFormat: formatVersion, Application: s.app,
		Fingerprint: db.owner.Fingerprint, Task: tdb.id, Created: start.UTC()}
	keys := snapKeys{}
	if full {
		m.Chain, m.Seq = newChainName(start), 0
	} else {
		m.Chain, m.Seq, m.Since = st.chain, st.seq+1, st.pin.ReadTs()
		keys = st.keys.clone()
	}
	// The new pin comes before the backup's read transaction: every
	// version above its read timestamp is kept until the next snapshot,
	// and every version at or below it is in this backup.
	pin := bdb.NewTransaction(false)
	keep := false
	defer func() {
		if !keep {
			pin.Discard()
		}
	}()

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := s.objectKey(tdb.id, m.Chain, m.Seq, "backup")
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return res, fmt.Errorf("changelog: snapshot task %s: create %s: %w", tdb.id, key, err)
	}
	fw := &frameWriter{w: w, h: sha256.New(), keys: keys}
	stream := bdb.NewStream()
	stream.NumGo = 1 // one read transaction: one consistent state
	stream.LogPrefix = "tidemark snapshot " + tdb.id
	stream.SinceTs = m.Since
	var out io.Writer = fw
	if s.opts.Pace != nil {
		out = &pacedWriter{ctx: ctx, w: fw, p: newPacer(s.opts.Pace)}
	}
	until, err := stream.Backup(out, m.Since)
	if err == nil {
		err = fw.finish()
	}
	if err != nil {
		cancel() // abandons the object
		_ = w.Close()
		return res, fmt.Errorf("changelog: snapshot task %s: write %s: %w", tdb.id, key, err)
	}
	if err := w.Close(); err != nil {
		return res, fmt.Errorf("changelog: snapshot task %s: write %s: %w", tdb.id, key, err)
	}
	m.Until = max(until, m.Since)
	m.Bytes = fw.n
	m.Checksum = "sha256:" + hex.EncodeToString(fw.h.Sum(nil))
	keys = fw.keys
	keys.fill(&m)
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return res, fmt.Errorf("changelog: snapshot task %s: encode manifest: %w", tdb.id, err)
	}
	mkey := s.objectKey(tdb.id, m.Chain, m.Seq, "manifest.json")
	if err := s.bucket.WriteAll(ctx, mkey, body, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return res, fmt.Errorf("changelog: snapshot task %s: write %s: %w", tdb.id, mkey, err)
	}
	if st.pin != nil {
		st.pin.Discard()
	}
	st.pin, st.chain, st.seq, st.keys, st.pinned = pin, m.Chain, m.Seq, keys, time.Now()
	keep = true
	res.Manifest, res.Duration = m, time.Since(start)
	if full {
		n, err := s.prune(ctx, tdb.id, m.Chain)
		res.Pruned = n
		if err != nil {
			s.opts.Logger.Warn("delete old snapshot chains", "task", tdb.id, "err", err)
		}
	}
	return res, nil
}

// prune deletes the chains of task older than the Retention newest
// complete ones, current (just completed) included.
func (s *SnapshotStore) prune(ctx context.Context, task, current string) (int, error) {
	chains, err := s.chains(ctx, task)
	if err != nil {
		return 0, err
	}
	// Complete chains: a full backup's manifest exists.
	var complete []string
	for _, c := range chains {
		if c == current {
			complete = append(complete, c)
			continue
		}
		if ok, err := s.bucket.Exists(ctx, s.objectKey(task, c, 0, "manifest.json")); err == nil && ok {
			complete = append(complete, c)
		}
	}
	if len(complete) <= s.opts.Retention {
		return 0, nil
	}
	oldestKept := complete[len(complete)-s.opts.Retention]
	n := 0
	var errs []error
	for _, c := range chains {
		if c >= oldestKept {
			continue
		}
		if err := s.deleteChain(ctx, task, c); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// deleteChain deletes the objects of a chain. An object already gone (an
// instance pruning the same chain) is not an error.
func (s *SnapshotStore) deleteChain(ctx context.Context, task, chain string) error {
	return listAgainOnNotFound(ctx, func() error {
		return s.eachChainObject(ctx, task, chain, func(key string) error {
			if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return fmt.Errorf("changelog: delete snapshot object %s: %w", key, err)
			}
			return nil
		})
	})
}

// eachChainObject calls fn with the key of each object of a chain, in key
// order.
func (s *SnapshotStore) eachChainObject(ctx context.Context, task, chain string, fn func(key string) error) error {
	it := s.bucket.List(&blob.ListOptions{Prefix: s.taskPrefix(task) + chain + "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("changelog: list snapshot chain %s of task %s: %w", chain, task, err)
		}
		if err := fn(obj.Key); err != nil {
			return err
		}
	}
}

// chains lists the chains of task, oldest first.
func (s *SnapshotStore) chains(ctx context.Context, task string) ([]string, error) {
	var out []string
	err := listAgainOnNotFound(ctx, func() error {
		out = out[:0]
		it := s.bucket.List(&blob.ListOptions{Prefix: s.taskPrefix(task), Delimiter: "/"})
		for {
			obj, err := it.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("changelog: list snapshot chains of task %s: %w", task, err)
			}
			if obj.IsDir {
				out = append(out, path.Base(strings.TrimSuffix(obj.Key, "/")))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// Manifests returns the manifests of a chain of task, by seq. A
// manifest that cannot be read or decoded is an error.
func (s *SnapshotStore) Manifests(ctx context.Context, task, chain string) ([]SnapshotManifest, error) {
	var out []SnapshotManifest
	err := listAgainOnNotFound(ctx, func() error {
		out = out[:0]
		return s.eachChainObject(ctx, task, chain, func(key string) error {
			if !strings.HasSuffix(key, ".manifest.json") {
				return nil
			}
			body, err := s.bucket.ReadAll(ctx, key)
			if err != nil {
				return fmt.Errorf("changelog: read snapshot manifest %s: %w", key, err)
			}
			var m SnapshotManifest
			if err := json.Unmarshal(body, &m); err != nil {
				return fmt.Errorf("changelog: decode snapshot manifest %s: %w", key, err)
			}
			out = append(out, m)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b SnapshotManifest) int { return a.Seq - b.Seq })
	return out, nil
}

// Chains lists the chains of task, oldest first (for tools and tests).
func (s *SnapshotStore) Chains(ctx context.Context, task string) ([]string, error) {
	return s.chains(ctx, task)
}

// snapKeys are the meta keys of a chain a manifest reports, as of its
// latest backup: changelog offsets, each store's input position and the
// registered stores.
type snapKeys struct {
	offsets   map[TopicPartition]int64
	positions map[string]InputPosition // by store id
	stores    map[string]string        // store id -> name
}

func (k snapKeys) clone() snapKeys {
	c := snapKeys{offsets: maps.Clone(k.offsets), positions: maps.Clone(k.positions), stores: maps.Clone(k.stores)}
	return c
}

// note records the newest version of a meta key seen in a backup.
func (k *snapKeys) note(kv *pb.KV) error {
	key := kv.Key
	if len(key) < 2 || key[0] != nsMeta {
		return nil
	}
	del := len(kv.Meta) > 0 && kv.Meta[0]&bitDelete != 0
	switch key[1] {
	case metaOffset:
		topic, p, err := parseOffsetKey(key)
		if err != nil {
			return err
		}
		if k.offsets == nil {
			k.offsets = map[TopicPartition]int64{}
		}
		tp := TopicPartition{topic, p}
		if del {
			delete(k.offsets, tp)
			return nil
		}
		a, err := decodeApplied(kv.Value)
		if err != nil {
			return err
		}
		k.offsets[tp] = a.Offset
	case metaPosition:
		if k.positions == nil {
			k.positions = map[string]InputPosition{}
		}
		id := string(key[2:])
		if del {
			delete(k.positions, id)
			return nil
		}
		p, err := decodePosition(kv.Value)
		if err != nil {
			return err
		}
		k.positions[id] = p
	case metaRegistry:
		if k.stores == nil {
			k.stores = map[string]string{}
		}
		id := string(key[2:])
		if del {
			delete(k.stores, id)
			return nil
		}
		name, _, err := parseStoreID(key[2:])
		if err != nil {
			return err
		}
		k.stores[id] = name
	}
	return nil
}

// bitDelete is Badger's delete marker bit in a backup's KV meta.
const bitDelete = 1 << 0

func (k snapKeys) fill(m *SnapshotManifest) {
	m.Offsets = m.Offsets[:0]
	for tp, off := range k.offsets {
		m.Offsets = append(m.Offsets, SnapshotOffset{tp.Topic, tp.Partition, off})
	}
	slices.SortFunc(m.Offsets, func(a, b SnapshotOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	pos := InputPosition{}
	for _, p := range k.positions {
		pos.Merge(p)
	}
	if len(pos) > 0 {
		m.Position = pos
	}
	names := map[string]bool{}
	for _, n := range k.stores {
		names[n] = true
	}
	m.Stores = slices.Sorted(maps.Keys(names))
}

// frameWriter passes a backup on to w, hashing and counting it, and reads
// the meta keys out of its frames (a little-endian uint64 length, then a
// protobuf KVList) for the manifest. Within a frame, a key's versions come
// newest first; a key is in one frame.
type frameWriter struct {
	w    io.Writer
	h    hash.Hash
	n    int64
	keys snapKeys
	buf  []byte
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.h.Write(p[:n])
	f.n += int64(n)
	if err != nil {
		return n, err
	}
	f.buf = append(f.buf, p...)
	for len(f.buf) >= 8 {
		size := binary.LittleEndian.Uint64(f.buf)
		if uint64(len(f.buf)-8) < size {
			break
		}
		if err := f.frame(f.buf[8 : 8+size]); err != nil {
			return n, err
		}
		f.buf = f.buf[8+size:]
	}
	if len(f.buf) == 0 {
		f.buf = nil // do not keep a large frame's array
	}
	return n, nil
}

func (f *frameWriter) frame(b []byte) error {
	var list pb.KVList
	if err := proto.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("decode backup frame: %w", err)
	}
	seen := map[string]bool{}
	for _, kv := range list.Kv {
		if seen[string(kv.Key)] {
			continue // an older version
		}
		seen[string(kv.Key)] = true
		if err := f.keys.note(kv); err != nil {
			return fmt.Errorf("backup meta key %q: %w", kv.Key, err)
		}
	}
	return nil
}

func (f *frameWriter) finish() error {
	if len(f.buf) != 0 {
		return fmt.Errorf("backup ends in a partial frame of %d bytes", len(f.buf))
	}
	return nil
}

// committedSince reports whether a write committed to bdb after read
// timestamp ts: a new read transaction's timestamp is the last commit's.
// (Badger's DB.MaxVersion would answer too, but it reads the memtable's
// version without the lock its writer holds: a data race under -race.)
func committedSince(bdb *badger.DB, ts uint64) bool {
	txn := bdb.NewTransaction(false)
	defer txn.Discard()
	return txn.ReadTs() > ts
}
