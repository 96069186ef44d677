package testbroker

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// validClusterID checks what `kafka-storage format -t` accepts: 22 characters
// of unpadded base64url that decode to 16 bytes, not starting with '-'.
func validClusterID(t *testing.T, id string) {
	t.Helper()
	if len(id) != 22 {
		t.Fatalf("cluster id %q has %d characters, want 22", id, len(id))
	}
	if id[0] == '-' {
		t.Fatalf("cluster id %q starts with '-': the storage tool reads it as an option", id)
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != 16 {
		t.Fatalf("cluster id %q is not base64url of 16 bytes: %v (%d bytes)", id, err, len(b))
	}
}

func TestClusterIDNeverStartsWithDash(t *testing.T) {
	// One random id in 64 starts with '-' without the redraw; 10000 draws
	// miss that with probability (63/64)^10000 ≈ 1e-68.
	for range 10000 {
		validClusterID(t, clusterID())
	}
}

func TestClusterIDRedrawsALeadingDash(t *testing.T) {
	dash := bytes.Repeat([]byte{0xf8}, 16) // 0xf8>>2 = 62, base64url '-'
	ok := bytes.Repeat([]byte{0x01}, 16)
	tests := []struct {
		name   string
		random []byte
	}{
		{"an id without a leading dash is the first draw", ok},
		{"a leading dash is drawn again", append(dash, ok...)},
		{"several leading dashes in a row are all drawn again", append(append(dash, dash...), ok...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := newClusterID(bytes.NewReader(tc.random))
			validClusterID(t, id)
			if id != newClusterID(bytes.NewReader(ok)) {
				t.Fatalf("id %q is not the first draw without a leading dash", id)
			}
		})
	}
}

func TestClusterIDIsAVersion4UUID(t *testing.T) {
	b, _ := base64.RawURLEncoding.DecodeString(newClusterID(bytes.NewReader(bytes.Repeat([]byte{0xff}, 16))))
	if b[6]>>4 != 4 || b[8]>>6 != 2 {
		t.Fatalf("id bytes %x: want version 4 and the RFC 4122 variant, as Kafka's Uuid.randomUuid", b)
	}
}
