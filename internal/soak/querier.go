package soak

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The querier asks the instances' interactive query endpoint for random
// keys while the faults go on, and the checker holds every answer to what
// the service documents: an answer reads committed state only, at the
// input position it names. So a count answered for a key must equal the
// number of that key's valid input records below the position, in the
// partition the answer read: ahead of it is uncommitted state, behind it
// a position that lies. Like the rest of the checker it decodes the
// answers itself (JSON, the value's 8 big-endian bytes) and imports
// nothing of the service.

// QueryAnswer is one answer of GET /stores/{store}/keys/{key}: 200, or
// 404 (the key not in the state at that position).
type QueryAnswer struct {
	Instance  string
	Key       string
	Found     bool
	Value     int64
	Partition int32
	// Position is the next offset of the key's input partition that the
	// state answered from reflects; 0 when the answer names none (a task
	// that has committed nothing yet reflects no input).
	Position int64
	At       time.Duration
}

// FrontierAnswer is one answer of GET /frontier for the output topic.
type FrontierAnswer struct {
	Instance string
	// Watermark: every output stamped at or before it is committed, the
	// answer says; Offsets: per output partition, the next offset after
	// the highest committed output.
	Watermark int64
	Offsets   []int64
	At        time.Duration
	// Tasks and Publishers, as the answer gave them: what a wrong answer
	// is explained by (which task's mark, published by whom).
	Tasks      json.RawMessage
	Publishers []string
}

// frontierEvery is how many key queries the querier sends per frontier
// query. A wrong frontier shows only in the moments between two commits
// (an output whose transaction had not ended yet), so frontiers are asked
// often: at 10 a campaign asked about 700, and one wrong frontier took many
// campaigns to show.
const frontierEvery = 4

// Querier queries the fleet's instances at random.
type Querier struct {
	fleet              *Fleet
	store, input, sink string
	every              time.Duration
	start              time.Time
	rng                *rand.Rand
	zf                 *rand.Zipf
	client             *http.Client

	mu        sync.Mutex
	answers   []QueryAnswer
	frontiers []FrontierAnswer
	statuses  map[string]int
}

// NewQuerier queries store (whose state counts records of topic input) on
// the fleet's running instances, one query every every, keys drawn like
// the producer's (keys k000000.., Zipf), and every frontierEvery-th time
// the frontier of sink too.
func NewQuerier(f *Fleet, store, input, sink string, keys int, every time.Duration, seed uint64, start time.Time) *Querier {
	rng := rand.New(rand.NewPCG(seed, 0x9e7))
	return &Querier{
		fleet: f, store: store, input: input, sink: sink, every: every, start: start, rng: rng,
		zf:       rand.NewZipf(rng, 1.1, 4, uint64(keys-1)),
		client:   &http.Client{Timeout: 2 * time.Second},
		statuses: map[string]int{},
	}
}

// Run queries until ctx is done.
func (q *Querier) Run(ctx context.Context) {
	t := time.NewTicker(q.every)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		running := q.fleet.Running()
		if len(running) == 0 {
			continue
		}
		id := running[q.rng.IntN(len(running))]
		key := Key(int(q.zf.Uint64()))
		addr := q.fleet.HTTPAddr(id)
		if addr == "" {
			q.count("no address yet")
			continue
		}
		if n%frontierEvery == 0 {
			q.frontier(ctx, id, addr)
		}
		q.query(ctx, id, addr, key, false)
	}
}

// get sends a GET to u and returns the answer's status and body; ok false
// (counted under what, e.g. "frontier ", + "no answer") when there was
// none: refused while an instance restarts, timed out while it is frozen.
func (q *Querier) get(ctx context.Context, what, u string) (code int, body []byte, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		q.count(what + "request: " + err.Error())
		return 0, nil, false
	}
	resp, err := q.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			q.count(what + "no answer")
		}
		return 0, nil, false
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		if ctx.Err() == nil {
			q.count(what + "no answer")
		}
		return 0, nil, false
	}
	return resp.StatusCode, body, true
}

// frontier asks instance id at addr for the sink's frontier.
func (q *Querier) frontier(ctx context.Context, id, addr string) {
	at := time.Since(q.start)
	code, body, ok := q.get(ctx, "frontier ", fmt.Sprintf("http://%s/frontier?sink=%s", addr, url.QueryEscape(q.sink)))
	if !ok {
		return
	}
	status := "frontier " + strconv.Itoa(code)
	if code != http.StatusOK {
		q.count(status)
		return
	}
	var raw struct {
		Sinks map[string]struct {
			Partitions []struct {
				Offset int64 `json:"offset"`
			} `json:"partitions"`
			Watermark  int64           `json:"watermark_ms"`
			Tasks      json.RawMessage `json:"tasks"`
			Publishers []string        `json:"publishers"`
		} `json:"sinks"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		q.count(status + " undecodable: " + err.Error())
		return
	}
	sk, ok := raw.Sinks[q.sink]
	if !ok {
		q.count(status + " without the sink")
		return
	}
	a := FrontierAnswer{Instance: id, Watermark: sk.Watermark, At: at, Tasks: sk.Tasks, Publishers: sk.Publishers}
	for _, p := range sk.Partitions {
		a.Offsets = append(a.Offsets, p.Offset)
	}
	q.mu.Lock()
	q.statuses[status]++
	q.frontiers = append(q.frontiers, a)
	q.mu.Unlock()
}

func (q *Querier) count(status string) {
	q.mu.Lock()
	q.statuses[status]++
	q.mu.Unlock()
}

// queryAnswer is the part of an answer the checker reads.
type queryAnswer struct {
	Value     string                      `json:"value"`
	Encoding  string                      `json:"encoding"`
	Partition *int32                      `json:"partition"`
	Position  map[string]map[string]int64 `json:"position"`
}

// query asks instance id at addr for key; redirected says it was sent
// there by another instance's 421.
func (q *Querier) query(ctx context.Context, id, addr, key string, redirected bool) {
	at := time.Since(q.start)
	code, body, ok := q.get(ctx, "", fmt.Sprintf("http://%s/stores/%s/keys/%s", addr, url.PathEscape(q.store), url.PathEscape(key)))
	if !ok {
		return
	}
	status := strconv.Itoa(code)
	if code == http.StatusServiceUnavailable && strings.Contains(string(body), "lost contact") {
		status += " out of contact" // processor.ErrOutOfContact: cut off or frozen past the session timeout
	}
	if code == http.StatusMisdirectedRequest && !redirected {
		// Another instance owns the key: ask it, as a client would.
		var owner struct {
			Instance string `json:"owner"`
			HTTP     string `json:"owner_http"`
		}
		if json.Unmarshal(body, &owner) == nil && owner.HTTP != "" && owner.Instance != "" {
			q.count(status)
			q.query(ctx, owner.Instance, owner.HTTP, key, true)
			return
		}
	}
	if code != http.StatusOK && code != http.StatusNotFound {
		q.count(status)
		return
	}
	a, err := decodeAnswer(body, code == http.StatusOK, q.input)
	if err != nil {
		q.count(status + " undecodable: " + err.Error())
		return
	}
	a.Instance, a.Key, a.At = id, key, at
	q.mu.Lock()
	q.statuses[status]++
	q.answers = append(q.answers, a)
	q.mu.Unlock()
}

func decodeAnswer(body []byte, found bool, input string) (QueryAnswer, error) {
	var raw queryAnswer
	if err := json.Unmarshal(body, &raw); err != nil {
		return QueryAnswer{}, err
	}
	if raw.Partition == nil {
		return QueryAnswer{}, fmt.Errorf("no partition in %s", body)
	}
	a := QueryAnswer{Found: found, Partition: *raw.Partition}
	if off, ok := raw.Position[input][strconv.Itoa(int(a.Partition))]; ok {
		a.Position = off
	}
	if !found {
		return a, nil
	}
	if raw.Encoding != "base64" {
		return a, fmt.Errorf("value encoding %q, want base64 (8 bytes)", raw.Encoding)
	}
	v, err := base64.StdEncoding.DecodeString(raw.Value)
	if err != nil || len(v) != 8 {
		return a, fmt.Errorf("value %q is not 8 base64 bytes", raw.Value)
	}
	a.Value = int64(binary.BigEndian.Uint64(v))
	return a, nil
}

// Answers returns what the querier got: its key answers, its frontier
// answers, and every status (an HTTP code, "no answer", ...) with its
// count.
func (q *Querier) Answers() ([]QueryAnswer, []FrontierAnswer, map[string]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := make(map[string]int, len(q.statuses))
	for k, v := range q.statuses {
		st[k] = v
	}
	return append([]QueryAnswer(nil), q.answers...), append([]FrontierAnswer(nil), q.frontiers...), st
}

// QueryReport is the interactive queries' verdict.
type QueryReport struct {
	// Checked counts the answers held to the input log (200 and 404),
	// Found those that found the key; Wrong those whose count is not
	// the input's below their position (Examples shows some).
	Checked, Found, Wrong int
	// Frontiers counts the frontier answers checked, FrontierWrong those
	// that claimed an output committed before it was; FrontierCounts the
	// key counts the answers' watermarks covered, all answers together
	// (0: the watermarks never covered anything, and the check is void).
	Frontiers, FrontierWrong, FrontierCounts int
	Examples                                 []string
	Statuses                                 map[string]int
}

// CheckQueries holds each answer to the input log: the count of the key's
// valid records in the answer's partition below its position.
func CheckQueries(answers []QueryAnswer, statuses map[string]int, log InputLog) QueryReport {
	rp := QueryReport{Statuses: statuses}
	wrong := func(a QueryAnswer, format string, args ...any) {
		rp.Wrong++
		if len(rp.Examples) < maxExamples {
			rp.Examples = append(rp.Examples, fmt.Sprintf("%s at +%s, key %s, partition %d, position %d: ", a.Instance, a.At.Round(100*time.Millisecond), a.Key, a.Partition, a.Position)+fmt.Sprintf(format, args...))
		}
	}
	for _, a := range answers {
		rp.Checked++
		if a.Found {
			rp.Found++
		}
		below, elsewhere := 0, int32(-1)
		for _, c := range log.Offsets[a.Key] {
			switch {
			case c.Partition != a.Partition:
				elsewhere = c.Partition
			case c.Offset < a.Position:
				below++
			}
		}
		got := int64(0)
		if a.Found {
			got = a.Value
		}
		switch {
		case elsewhere >= 0:
			wrong(a, "the key's input is in partition %d", elsewhere)
		case got != int64(below) && !a.Found:
			wrong(a, "answered not found, the input below that position holds %d of the key's records", below)
		case got != int64(below):
			wrong(a, "answered %d, the input below that position holds %d of the key's records", got, below)
		}
	}
	return rp
}

// String renders the report's summary line.
func (rp QueryReport) String() string {
	keys := make([]string, 0, len(rp.Statuses))
	for k := range rp.Statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := fmt.Sprintf("%d answers checked (%d found the key), %d wrong; %d frontiers checked (covering %d key counts), %d wrong; statuses:", rp.Checked, rp.Found, rp.Wrong, rp.Frontiers, rp.FrontierCounts, rp.FrontierWrong)
	for _, k := range keys {
		s += fmt.Sprintf(" %s×%d", k, rp.Statuses[k])
	}
	return s
}

// CheckFrontiers holds each frontier answer to the outputs: an answer with
// watermark W says that every output stamped at or before W is committed,
// below the offsets it names. A key's n-th count is stamped with the
// latest timestamp of its first n valid input records, so for every key
// the highest count stamped at or before W must be in the output log
// below the answer's offset of its partition. outputOf finds a key's
// output of a count in the final read of the outputs.
func (rp *QueryReport) CheckFrontiers(answers []FrontierAnswer, log InputLog, outputOf func(key string, count int64) (Coord, bool)) {
	wrong := func(a FrontierAnswer, format string, args ...any) {
		rp.FrontierWrong++
		if len(rp.Examples) < 2*maxExamples {
			rp.Examples = append(rp.Examples, fmt.Sprintf("frontier of %s at +%s, watermark %d: ", a.Instance, a.At.Round(100*time.Millisecond), a.Watermark)+fmt.Sprintf(format, args...))
		}
	}
	// Per key, the stamp of each count: the running maximum of its
	// inputs' timestamps.
	stamps := make(map[string][]int64, len(log.Times))
	for key, times := range log.Times {
		run := make([]int64, len(times))
		for i, t := range times {
			run[i] = t
			if i > 0 && run[i-1] > t {
				run[i] = run[i-1]
			}
		}
		stamps[key] = run
	}
	for _, a := range answers {
		rp.Frontiers++
	keys:
		for key, run := range stamps {
			// The highest count stamped at or before the watermark.
			n := sort.Search(len(run), func(i int) bool { return run[i] > a.Watermark })
			if n == 0 {
				continue
			}
			rp.FrontierCounts++
			c, ok := outputOf(key, int64(n))
			switch {
			case !ok:
				wrong(a, "key %s's count %d (stamped %d) was never output", key, n, run[n-1])
				break keys
			case int(c.Partition) >= len(a.Offsets):
				wrong(a, "key %s's count %d is in partition %d, the answer names %d partitions", key, n, c.Partition, len(a.Offsets))
				break keys
			case c.Offset >= a.Offsets[c.Partition]:
				wrong(a, "key %s's count %d (stamped %d) is at offset %d of partition %d, not below the committed offset %d the answer names (offsets %v, tasks %s, publishers %v)", key, n, run[n-1], c.Offset, c.Partition, a.Offsets[c.Partition], a.Offsets, a.Tasks, a.Publishers)
				break keys
			}
		}
	}
}
