package kafkatest

import (
	"slices"
	"strings"
	"testing"
)

func TestPublishedAddr(t *testing.T) {
	for _, tt := range []struct{ name, out, want string }{
		{"one binding", "40123/tcp -> 127.0.0.1:40123\n", "127.0.0.1:40123"},
		{"an IPv6 binding first", "40123/tcp -> [::1]:40123\n40123/tcp -> 127.0.0.1:40123\n", "127.0.0.1:40123"},
		{"no binding on loopback", "40123/tcp -> 0.0.0.0:40123\n", ""},
		{"nothing published", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := publishedAddr(tt.out)
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Fatalf("publishedAddr(%q) = %q, %v; want %q", tt.out, got, err, tt.want)
			}
		})
	}
}

func TestContainerRunArgsBindAndAdvertiseOnePort(t *testing.T) {
	args := containerRunArgs("40123")
	if args[0] != "run" || args[len(args)-1] != ContainerImage {
		t.Fatalf("args %v: want docker run ... %s", args, ContainerImage)
	}
	for _, want := range []string{"--name", ContainerName, "127.0.0.1:40123:40123/tcp",
		"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:40123", "KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:40123,CONTROLLER://localhost:9093"} {
		if !slices.ContainsFunc(args, func(a string) bool { return a == want || strings.HasSuffix(a, "="+want) }) {
			t.Errorf("args %v lack %q", args, want)
		}
	}
}
