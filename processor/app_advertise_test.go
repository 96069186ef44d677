package processor

import (
	"os"
	"testing"
)

func TestAdvertisedAddrIsDialable(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, adv, bound, want string }{
		{"port 0 takes the bound port", "127.0.0.1:0", "127.0.0.1:41234", "127.0.0.1:41234"},
		{"no host takes the host name", ":8080", "[::]:8080", host + ":8080"},
		{"no host and port 0 take both", ":0", "[::]:41234", host + ":41234"},
		{"an unspecified host takes the host name", "0.0.0.0:8080", "0.0.0.0:8080", host + ":8080"},
		{"an explicit address is kept", "query.example.com:443", "[::]:8080", "query.example.com:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := advertisedAddr(tc.adv, tc.bound); got != tc.want {
				t.Fatalf("advertisedAddr(%q, %q) = %q, want %q", tc.adv, tc.bound, got, tc.want)
			}
		})
	}
}
