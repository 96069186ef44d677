package topology

import "errors"

// Sentinel errors wrapped by Build; callers branch with errors.Is. Every
// wrapping error names the operator it concerns.
var (
	// ErrMissingSerde: an operator needs to serialize keys or values (a sink,
	// a store, a repartition topic) and no serde is known for them.
	ErrMissingSerde = errors.New("missing serde")
	// ErrDuplicateName: two operators, stores or topics have the same name.
	ErrDuplicateName = errors.New("duplicate name")
	// ErrInvalidWindow: a window has a non-positive size, advance or gap, an
	// advance larger than the size, or a negative grace.
	ErrInvalidWindow = errors.New("invalid window")
	// ErrInvalidTopology: anything else structurally wrong (an unknown store,
	// a stream from a different builder, no sources).
	ErrInvalidTopology = errors.New("invalid topology")
	// ErrNotCopartitioned: inputs that must be co-partitioned have different
	// partition counts (CheckCopartitioning, at runtime startup).
	ErrNotCopartitioned = errors.New("inputs not co-partitioned")
	// ErrUnknownStore: a processor asked for a store it is not connected to.
	ErrUnknownStore = errors.New("unknown store")
	// ErrDeserialize is wrapped by a source's error for an input record its
	// key or value serde cannot decode, whatever error the serde returned,
	// and by nothing else: a runtime routes exactly these records to a
	// dead-letter topic. A decode failure further down (a store value, a
	// windowed key) is a bug or corrupt state, not a bad input record.
	ErrDeserialize = errors.New("deserialize")
)
