package topology

// TenantHeader is the header that carries a record's tenant through the
// application's internal (repartition) topics, so that outputs downstream
// of a repartition are still attributed to the tenant of the input that
// caused them. Repartition sinks add it after the record's own headers,
// and repartition sources read and remove the last one: user topics never
// see it, and a header of that name on a user source topic means nothing
// (it stays one of the record's own headers). A sink adds it when the
// tenant is not "", or with the value "" when the record has a header of
// that name of its own, so that one is never taken for the tenant.
const TenantHeader = "tidemark.tenant"

// WithTenant names the tenant of each record read from a source: f gets the
// decoded key and value (the zero values for a null key or a tombstone).
// Every output emitted while the task processes that record, in any
// sub-topology it reaches through repartitions, carries the tenant
// (OutputRecord.Tenant), and the runtime accounts outputs, staleness and
// the frontier controller's per-tenant targets by it. Outputs of
// punctuations (TTL sweeps, stream- and wall-clock punctuators), the final
// results of closed windows and sessions (EmitFinal), updates leaving a
// Suppress buffer, and of sources without WithTenant carry the tenant "":
// they are built from earlier records, possibly of other tenants, not from
// the record whose arrival released them. K and V must match the
// source's types (Build checks). Keep f cheap and deterministic: it runs
// once per input record.
func WithTenant[K, V any](f func(key K, value V) string) SourceOption {
	return sourceOpt{func(c *opConfig) { c.tenant = f }}
}

// TenantKeeper is an optional extension of TaskEnv: an environment that
// implements it attributes the outputs of the record being processed to a
// tenant. A source node calls SetTenant before forwarding each record
// (with "" when it has no tenant), and a repartition sink reads Tenant to
// carry it in TenantHeader. The environment resets the tenant to "" when
// it leaves the record.
type TenantKeeper interface {
	SetTenant(tenant string)
	Tenant() string
}

func setTenant(env TaskEnv, tenant string) {
	if tk, ok := env.(TenantKeeper); ok {
		tk.SetTenant(tenant)
	}
}

func tenantOf(env TaskEnv) string {
	if tk, ok := env.(TenantKeeper); ok {
		return tk.Tenant()
	}
	return ""
}

// sourceTenant is the tenant of a decoded record r: from TenantHeader on an
// internal source (removing the header, which is the runtime's, not the
// record's), from the WithTenant function on a user source, or "". The
// header slice is copied before removal: the caller owns in.Headers.
func (o *sourceOp[K, V]) sourceTenant(r *Record[K, V]) string {
	if o.internal {
		// The last one: a repartition sink appends its header after the
		// record's own, which may include a user header of that name.
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if h := r.Headers[i]; h.Key == TenantHeader {
				hs := make([]Header, 0, len(r.Headers)-1)
				hs = append(append(hs, r.Headers[:i]...), r.Headers[i+1:]...)
				if len(hs) == 0 {
					hs = nil
				}
				r.Headers = hs
				return string(h.Value)
			}
		}
		return ""
	}
	if o.tenant != nil {
		return o.tenant(r.Key, r.Value)
	}
	return ""
}

// withTenantHeader returns hs with TenantHeader added for a repartition
// sink, in buf (reused across records, so hs's backing array, which the
// record's producer owns, is never written).
func withTenantHeader(buf, hs []Header, tenant string) []Header {
	buf = append(buf[:0], hs...)
	return append(buf, Header{Key: TenantHeader, Value: []byte(tenant)})
}

// untenanted clears the tenant for the outputs that follow and returns the
// one to restore: `defer setTenant(env, untenanted(env))`. Operators that
// emit results built from other records than the one being processed (the
// final results of closed windows and sessions, suppressed updates leaving
// the buffer) use it, so a record of one tenant that advances stream time
// is not charged with the results of every tenant it closes: those carry
// "", like punctuation outputs.
func untenanted(env TaskEnv) string {
	t := tenantOf(env)
	if t != "" {
		setTenant(env, "")
	}
	return t
}

// hasTenantHeader reports whether hs has a header named TenantHeader (a
// user's, on a record read from a user topic).
func hasTenantHeader(hs []Header) bool {
	for _, h := range hs {
		if h.Key == TenantHeader {
			return true
		}
	}
	return false
}
