package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every instance of an application owns one transactional id,
// TransactionalID(app, instance). A member that dies with a transaction
// open (SIGKILL, a lost node, a restart with a new instance id) leaves that
// transaction hanging until the broker times it out: meanwhile it pins the
// last stable offset of every partition it wrote, so read_committed readers
// of the outputs stall, and a restore of a changelog it touched cannot reach
// the records other members committed after it. The fencer finds such
// transactions (KIP-664 ListTransactions) and ends them by initialising a
// producer with the departed instance's transactional id: the coordinator
// bumps the epoch and aborts the open transaction on every partition, the
// same thing the instance itself does when it restarts.

// TransactionalID is the transactional id of an application instance.
// Application ids and group instance ids may not contain '/', so the id
// parses back unambiguously, and no other application's ids share the
// prefix.
func TransactionalID(app, instance string) string { return app + "/" + instance }

// instanceOf returns the instance of an application's transactional id.
func instanceOf(app, txnID string) (string, bool) {
	inst, ok := strings.CutPrefix(txnID, app+"/")
	return inst, ok && inst != ""
}

// OpenTxn is a transaction the cluster reports as open.
type OpenTxn struct {
	TxnID      string
	ProducerID int64
	State      string
}

// Departed picks, among open transactions, those of app's instances that
// are not live: not self and not among the group's current members. It is
// pure, so the rule is tested without a broker.
//
// Only transactions in the Ongoing state are picked: PrepareCommit and
// PrepareAbort are already ending (their markers are being written), and
// fencing them would only wait for that.
func Departed(app, self string, live map[string]bool, open []OpenTxn) []OpenTxn {
	var out []OpenTxn
	for _, t := range open {
		inst, ok := instanceOf(app, t.TxnID)
		if !ok || inst == self || live[inst] || t.State != "Ongoing" {
			continue
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TxnID < out[j].TxnID })
	return out
}

// Fencer aborts the open transactions of departed instances of one
// application.
type Fencer struct {
	App  string
	Self string // this instance, never fenced
	// ClientOpts reach the cluster (seeds, TLS, SASL); the fencer adds the
	// transactional id of the instance it fences.
	ClientOpts []kgo.Opt
	Adm        *kadm.Client
}

// FenceDeparted lists the application's open transactions, keeps those of
// instances that are neither this one nor in live, and fences each one. It
// returns the transactional ids it fenced. Fencing a live zombie (a member
// the group already dropped) is safe: its next commit fails as fenced and
// its session starts over.
func (f *Fencer) FenceDeparted(ctx context.Context, live map[string]bool) ([]string, error) {
	listed, err := f.Adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil && len(listed) == 0 {
		return nil, fmt.Errorf("txn: list open transactions: %w", err)
	}
	open := make([]OpenTxn, 0, len(listed))
	for _, l := range listed {
		open = append(open, OpenTxn{TxnID: l.TxnID, ProducerID: l.ProducerID, State: l.State})
	}
	var fenced []string
	var errs []error
	for _, t := range Departed(f.App, f.Self, live, open) {
		if err := f.fence(ctx, t.TxnID); err != nil {
			errs = append(errs, err)
			continue
		}
		fenced = append(fenced, t.TxnID)
	}
	return fenced, errors.Join(errs...)
}

// fence initialises a producer with txnID: the coordinator aborts its open
// transaction (writing abort markers to every partition it touched) before
// it answers.
func (f *Fencer) fence(ctx context.Context, txnID string) error {
	opts := append(append([]kgo.Opt(nil), f.ClientOpts...),
		kgo.TransactionalID(txnID),
		// The coordinator keeps the timeout of the last InitProducerId;
		// a short one makes a later hang of this id (there should be
		// none) end soon.
		kgo.TransactionTimeout(10*time.Second),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("txn: fence %s: client: %w", txnID, err)
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("txn: fence %s: init producer id: %w", txnID, err)
	}
	return nil
}
