package topology

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// Builder collects the operators of one application's topology. The DSL
// methods do not return errors, so chains stay fluent: problems (missing
// serdes, duplicate names, bad windows) are recorded with the operator's
// name and returned together by Build.
type Builder struct {
	app        string
	nodes      []*node
	names      map[string]*node
	stores     map[string]*StoreInfo
	storeOrder []string
	topics     map[string]string // internal topic -> owner operator
	repart     []InternalTopic
	copart     []copartReq
	globals    []*GlobalStoreInfo // global.go
	errs       []error
	lateness   time.Duration
	strict     bool
	built      bool
}

type copartReq struct {
	operator string
	inputs   []*node
}

// BuilderOption configures a Builder.
type BuilderOption func(*Builder)

// WithAllowedLateness sets how far behind stream time a task's watermark
// trails: watermark = min over the task's inputs of (stream time − d).
func WithAllowedLateness(d time.Duration) BuilderOption {
	return func(b *Builder) { b.lateness = d }
}

// RequireNamedState makes Build fail when a store or repartition topic would
// get a generated name. Generated names are deterministic but change when
// upstream operators are inserted; production topologies should name state.
func RequireNamedState() BuilderOption { return func(b *Builder) { b.strict = true } }

// NewBuilder starts a topology for the application id app, which prefixes
// every internal topic: "<app>-<name>-changelog", "<app>-<name>-repartition".
func NewBuilder(app string, opts ...BuilderOption) *Builder {
	b := &Builder{
		app:    app,
		names:  map[string]*node{},
		stores: map[string]*StoreInfo{},
		topics: map[string]string{},
	}
	if err := CheckApplicationID(app); err != nil {
		b.errs = append(b.errs, fmt.Errorf("%w: %w", ErrInvalidTopology, err))
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

func (b *Builder) fail(err error) { b.errs = append(b.errs, err) }

// addNode creates a node under parents. Which options an operator accepts
// is settled by its option type (options.go), not here.
func (b *Builder) addNode(kind NodeKind, op string, parents []*node, cfg *opConfig, impl nodeImpl) *node {
	n := &node{kind: kind, op: op, impl: impl, seq: len(b.nodes)}
	for _, p := range parents {
		if p == nil {
			continue
		}
		n.parents = append(n.parents, p)
		p.children = append(p.children, n)
	}
	n.name, n.chain, n.pos, n.numbered = b.nodeName(op, n.parents, cfg.name)
	if _, dup := b.names[n.name]; dup {
		b.fail(errorf(n.name, "%w: operator name already used", ErrDuplicateName))
	}
	b.names[n.name] = n
	b.nodes = append(b.nodes, n)
	b.checkTTL(n, cfg)
	b.checkCache(n, cfg)
	return n
}

// addStore declares a store owned by n. The name is the operator's explicit
// name, else "<operator>-STORE"; suffix distinguishes several stores of one
// operator (joins).
func (b *Builder) addStore(n *node, cfg *opConfig, suffix string, spec store.Spec, timestamped bool) string {
	base := n.name
	if cfg.name == "" {
		base += "-STORE"
		if b.strict {
			b.fail(errorf(n.name, "%w: store has a generated name; name the operator with Named (RequireNamedState)", ErrInvalidTopology))
		}
	}
	if cfg.versioned {
		b.fail(errorf(n.name, "%w: Versioned applies to Builder.Table and Stream.ToTable only", ErrInvalidTopology))
	}
	spec.Name = base + suffix
	spec.Logged = !cfg.notLogged
	spec.ChangelogConfig = cfg.changelogConf
	b.registerStore(n, spec, timestamped)
	return spec.Name
}

func (b *Builder) registerStore(n *node, spec store.Spec, timestamped bool) {
	if _, dup := b.stores[spec.Name]; dup {
		b.fail(errorf(n.name, "%w: store %q already exists", ErrDuplicateName, spec.Name))
		return
	}
	info := &StoreInfo{Spec: spec, Timestamped: timestamped}
	if spec.Logged {
		info.Changelog = b.app + "-" + spec.Name + "-changelog"
		if err := b.claimTopic(info.Changelog, n.name); err != nil {
			b.fail(err)
		}
	}
	b.stores[spec.Name] = info
	b.storeOrder = append(b.storeOrder, spec.Name)
	b.connect(n, spec.Name)
}

func (b *Builder) connect(n *node, storeName string) {
	if !slices.Contains(n.stores, storeName) {
		n.stores = append(n.stores, storeName)
	}
	if info, ok := b.stores[storeName]; ok && !slices.Contains(info.Nodes, n.name) {
		info.Nodes = append(info.Nodes, n.name)
	}
}

func (b *Builder) claimTopic(topic, owner string) error {
	if prev, dup := b.topics[topic]; dup {
		return errorf(owner, "%w: internal topic %q is also created by %q", ErrDuplicateName, topic, prev)
	}
	b.topics[topic] = owner
	return nil
}

// AddStore declares a store for Processor API operators, which connect to it
// with WithStores. Kind and Name are required; the changelog topic is
// "<app>-<Name>-changelog" when spec.Logged.
func (b *Builder) AddStore(spec store.Spec) {
	if spec.Name == "" {
		b.fail(fmt.Errorf("%w: AddStore: store spec has no name", ErrInvalidTopology))
		return
	}
	if spec.Kind < store.KindKeyValue || spec.Kind > store.KindSession {
		b.fail(fmt.Errorf("%w: AddStore %q: unknown store kind %d", ErrInvalidTopology, spec.Name, int(spec.Kind)))
		return
	}
	if _, dup := b.stores[spec.Name]; dup {
		b.fail(fmt.Errorf("AddStore: %w: store %q already exists", ErrDuplicateName, spec.Name))
		return
	}
	info := &StoreInfo{Spec: spec}
	if spec.Logged {
		info.Changelog = b.app + "-" + spec.Name + "-changelog"
		if err := b.claimTopic(info.Changelog, "store "+spec.Name); err != nil {
			b.fail(err)
		}
	}
	b.stores[spec.Name] = info
	b.storeOrder = append(b.storeOrder, spec.Name)
}

// requireCopartition records that the sources upstream of inputs must be
// co-partitioned for the join op.
func (b *Builder) requireCopartition(op string, inputs ...*node) {
	b.copart = append(b.copart, copartReq{operator: op, inputs: inputs})
}

func (b *Builder) checkSame(n *node, other *Builder) bool {
	if other != b {
		b.fail(errorf(n.name, "%w: operands come from different builders", ErrInvalidTopology))
		return false
	}
	return true
}

func (b *Builder) errors() error { return errors.Join(b.errs...) }

// CheckApplicationID checks an application id: it prefixes the application's
// internal topic names (and names its group and transactional ids), so
// it must be made of what a Kafka topic name may hold, and leave room for
// the suffixes within the 249 characters a topic name may have. Found
// only at the broker, a bad id failed after the state directory was made.
func CheckApplicationID(app string) error {
	if app == "" {
		return errors.New("empty application id")
	}
	if len(app) > 200 {
		return fmt.Errorf("application id of %d characters: at most 200 (it prefixes topic names, at most 249)", len(app))
	}
	for _, r := range app {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("application id %q: only ASCII letters, digits, '.', '_' and '-' (it prefixes topic names)", app)
		}
	}
	return nil
}
