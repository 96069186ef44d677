package topology

import "reflect"

// suppliesOneInstance calls a processor supplier twice and reports whether
// it returned the same instance both times (Kafka Streams'
// ApiUtils.checkSupplier). Each task needs its own instance: a shared one
// keeps the context of the task that called Init last, so every other task
// would forward, and write its stores, as that one. Only pointers can be
// told apart; pointers to zero-size types may share an address in Go and
// hold no state, so they pass.
func suppliesOneInstance[P any](supplier func() P) bool {
	a, b := reflect.ValueOf(supplier()), reflect.ValueOf(supplier())
	if !a.IsValid() || !b.IsValid() || a.Kind() != reflect.Pointer || a.Type() != b.Type() || a.IsNil() {
		return false
	}
	return a.Type().Elem().Size() > 0 && a.Pointer() == b.Pointer()
}
