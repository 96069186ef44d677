package pipelines_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
)

func TestConfigValidateChecksWithoutFillingIn(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   pipelines.Config
		field string // "" means valid
	}{
		{"the zero config is the documented defaults", pipelines.Config{}, ""},
		{"an advance longer than the window is rejected", pipelines.Config{FraudAdvance: 2 * time.Minute}, "FraudAdvance"},
		{"a negative grace is rejected", pipelines.Config{Grace: -time.Second}, "Grace"},
		{"two streams on one topic are rejected", pipelines.Config{Outputs: pipelines.Outputs{FraudAlerts: "carts"}}, "Outputs.FraudAlerts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			err := c.Validate()
			if !reflect.DeepEqual(c, tt.cfg) {
				t.Fatalf("Validate modified the config: %+v", c)
			}
			if (err == nil) != (tt.field == "") || (err != nil && !strings.Contains(err.Error(), tt.field)) {
				t.Fatalf("Validate = %v, want an error naming %q", err, tt.field)
			}
		})
	}
	var c pipelines.Config
	if c.EnsureDefaults(); c.Grace != 5*time.Second || c.FraudThreshold != 20 || c.Outputs != pipelines.DefaultOutputs {
		t.Fatalf("EnsureDefaults left %+v", c)
	}
}
