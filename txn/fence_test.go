package txn

import (
	"fmt"
	"testing"
)

func TestDepartedPicksOnlyOpenTransactionsOfGoneInstances(t *testing.T) {
	open := func(id, state string) OpenTxn { return OpenTxn{TxnID: id, State: state} }
	tests := []struct {
		name string
		live map[string]bool
		open []OpenTxn
		want string
	}{
		{"an instance no longer in the group is departed",
			map[string]bool{"b": true}, []OpenTxn{open("orders/a", "Ongoing"), open("orders/b", "Ongoing")}, "[orders/a]"},
		{"this instance is never fenced, even when the group does not list it yet",
			nil, []OpenTxn{open("orders/me", "Ongoing")}, "[]"},
		{"another application sharing a prefix is not ours",
			nil, []OpenTxn{open("orders-v2/a", "Ongoing"), open("ordersx/a", "Ongoing"), open("orders", "Ongoing")}, "[]"},
		{"a transaction already ending is left to finish",
			nil, []OpenTxn{open("orders/a", "PrepareCommit"), open("orders/b", "PrepareAbort"), open("orders/c", "Empty")}, "[]"},
		{"the old dash-separated id of another app cannot be mistaken for ours",
			nil, []OpenTxn{open("orders-a", "Ongoing")}, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			for _, d := range Departed("orders", "me", tt.live, tt.open) {
				ids = append(ids, d.TxnID)
			}
			if got := fmt.Sprintf("%v", ids); got != tt.want && !(tt.want == "[]" && len(ids) == 0) {
				t.Fatalf("departed = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestTransactionalIDParsesBack(t *testing.T) {
	id := TransactionalID("orders", "host-1.a_b")
	inst, ok := instanceOf("orders", id)
	if !ok || inst != "host-1.a_b" {
		t.Fatalf("instanceOf(%q) = %q, %v", id, inst, ok)
	}
	if _, ok := instanceOf("order", id); ok {
		t.Fatalf("%q parsed as an instance of app %q", id, "order")
	}
}
