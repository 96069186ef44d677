package schemas

import (
	"errors"
	"fmt"

	"github.com/tidemark-streams/tidemark/serde"
)

// Sentinels for why a record could not be decoded. Each is wrapped together
// with serde.ErrDecode, so errors.Is works for either.
var (
	// ErrMalformed: the payload is not valid Avro (or JSON) for the schema.
	ErrMalformed = errors.New("malformed payload")
	// ErrWireFormat: the Confluent header is missing, short, or does not
	// start with magic byte 0. It is serde.ErrWireFormat, shared with the
	// generic serde.Avro.
	ErrWireFormat = serde.ErrWireFormat
	// ErrUnknownSchemaID: the registry has no schema under the record's
	// id. It is serde.ErrUnknownSchemaID.
	ErrUnknownSchemaID = serde.ErrUnknownSchemaID
	// ErrWrongEventType: the record was written as a different event type
	// than the serde reads. A *WrongEventTypeError carries both names.
	ErrWrongEventType = errors.New("wrong event type")
	// ErrIncompatibleSchema: the writer's schema cannot be resolved to the
	// reader's, e.g. the reader has a field without a default that the
	// writer lacks, or a field changed type.
	ErrIncompatibleSchema = errors.New("incompatible writer schema")
	// ErrInvalidEvent: the record decoded but breaks an invariant of its
	// type (empty id, unknown enum value, non-positive quantity). Encoders
	// return it too, without serde.ErrDecode.
	ErrInvalidEvent = errors.New("invalid event")
)

// ErrRegistry wraps failures to talk to the Schema Registry (network,
// timeouts, 5xx, refusals). It deliberately does not wrap serde.ErrDecode:
// the record may be fine, so a caller should retry rather than dead-letter
// it. It is serde.ErrRegistry, shared with the generic serde.Avro, and
// sources fail the task with it even with SkipUndecodable.
var ErrRegistry = serde.ErrRegistry

// WrongEventTypeError reports a record whose writer schema names another
// record type than the one the serde reads.
type WrongEventTypeError struct {
	Want, Got string // full Avro names, e.g. tidemark.marketplace.CartEvent
}

func (e *WrongEventTypeError) Error() string {
	return fmt.Sprintf("%s: want %s, record was written as %s", ErrWrongEventType, e.Want, e.Got)
}

func (e *WrongEventTypeError) Is(target error) bool { return target == ErrWrongEventType }
