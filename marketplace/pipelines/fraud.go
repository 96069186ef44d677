package pipelines

import (
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Velocity is the running aggregate of one user's payment attempts in one
// window.
type Velocity struct {
	Attempts    int64 `json:"attempts"`
	Declined    int64 `json:"declined"`
	AmountCents int64 `json:"amount_cents"`
}

// FraudAlert is one window in which a user made at least
// Config.FraudThreshold payment attempts. Key: user id.
type FraudAlert struct {
	UserID        string `json:"user_id"`
	Attempts      int64  `json:"attempts"`
	Declined      int64  `json:"declined"`
	AmountCents   int64  `json:"amount_cents"`
	WindowStartMs int64  `json:"window_start_ms"`
	WindowEndMs   int64  `json:"window_end_ms"` // exclusive
}

// IsAttempt says whether a payment event counts toward the velocity: an
// authorization or a decline, the moments a card is charged or tried.
// Captures and refunds are follow-ups of an authorization and would count
// the same order twice.
func IsAttempt(p schemas.PaymentEvent) bool {
	return p.Status == schemas.PaymentAuthorized || p.Status == schemas.PaymentFailed
}

// addFraud adds the payment-velocity fraud signal:
//
//	Inputs.Payments (key order id) → deduplicated by event id (StorePaymentDedup) → attempts only (IsAttempt)
//	  → re-key by user id (repartition <app>-payments-by-user-repartition)
//	  → hopping windows FraudWindow/FraudAdvance, grace Grace, store StoreVelocity, emit-final
//	  → windows with Attempts ≥ FraudThreshold → Outputs.FraudAlerts (key user id, FraudAlert JSON)
//
// Emit-final means one alert per window, after stream time passes its end
// plus grace: an alert is never retracted, at the cost of arriving up to
// window + grace after the first suspicious payment. Windows are
// epoch-aligned, [start, start+FraudWindow).
func addFraud(in inputs, cfg Config) {
	byUser := in.payments.
		Filter(func(_ string, p schemas.PaymentEvent) bool { return IsAttempt(p) }, topology.Named("payment-attempts")).
		SelectKey(func(_ string, p schemas.PaymentEvent) string { return p.UserID }, topology.Named("payment-user")).
		GroupByKey(topology.Named("payments-by-user"))
	topology.WindowedBy(byUser, topology.HoppingWindows(cfg.FraudWindow, cfg.FraudAdvance, cfg.Grace)).
		Aggregate(func() Velocity { return Velocity{} },
			func(_ string, p schemas.PaymentEvent, v Velocity) Velocity {
				v.Attempts++
				if p.Status == schemas.PaymentFailed {
					v.Declined++
				}
				v.AmountCents += p.AmountCents
				return v
			}, serde.JSON[Velocity](), topology.Named(StoreVelocity), topology.EmitFinal()).
		ToStream(topology.Named("velocity-final")).
		Filter(func(_ topology.Windowed[string], v Velocity) bool { return v.Attempts >= cfg.FraudThreshold },
			topology.Named("velocity-over-threshold")).
		Map(func(w topology.Windowed[string], v Velocity) (string, FraudAlert) {
			return w.Key, FraudAlert{UserID: w.Key, Attempts: v.Attempts, Declined: v.Declined, AmountCents: v.AmountCents,
				WindowStartMs: w.Start, WindowEndMs: w.End}
		}, topology.Named("fraud-alert")).
		WithSerdes(serde.String(), serde.JSON[FraudAlert]()).
		To(cfg.Outputs.FraudAlerts, topology.Named("fraud-alerts-sink"))
}
