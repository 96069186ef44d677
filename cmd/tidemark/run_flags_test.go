package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestEveryRunFlagReachesTheConfig: each flag of `tidemark run` (and
// `tidemark describe`), given on the command line, changes the resolved
// configuration. A flag registered but never layered over the file and the
// environment is accepted and silently ignored: --max-warmup-replicas and
// --probing-rebalance-interval were.
func TestEveryRunFlagReachesTheConfig(t *testing.T) {
	var configPath string
	base := defaultServiceConfig()
	probe := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addServiceFlags(probe, &configPath, &base)
	none := func(string) string { return "" }
	want, err := resolveServiceConfig("", none, nil, defaultServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	probe.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" {
			return
		}
		var v string
		switch f.Value.Type() {
		case "bool":
			v = "true"
		case "int", "int32", "int64":
			v = "3"
		case "float64":
			v = "0.7"
		default: // strings, lists: a value no default has
			v = "flag-value"
		}
		f0 := defaultServiceConfig()
		fl := pflag.NewFlagSet("run", pflag.ContinueOnError)
		addServiceFlags(fl, &configPath, &f0)
		if err := fl.Parse([]string{"--" + f.Name + "=" + v}); err != nil {
			t.Fatalf("--%s=%s: %v", f.Name, v, err)
		}
		got, err := resolveServiceConfig("", none, fl, f0)
		if err != nil {
			t.Fatalf("--%s=%s: %v", f.Name, v, err)
		}
		if reflect.DeepEqual(got, want) {
			t.Errorf("--%s=%s is accepted but does not change the configuration", f.Name, v)
		}
	})
}

// TestEveryRunFlagHasItsVariable: the README's promise that every setting
// is a flag --name and a variable TIDEMARK_NAME, checked flag by flag.
func TestEveryRunFlagHasItsVariable(t *testing.T) {
	var configPath string
	base := defaultServiceConfig()
	probe := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addServiceFlags(probe, &configPath, &base)
	want, err := resolveServiceConfig("", func(string) string { return "" }, nil, defaultServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	probe.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" {
			return
		}
		v := "value"
		switch f.Value.Type() {
		case "bool":
			v = "true"
		case "int", "int32", "int64":
			v = "3"
		case "float64":
			v = "0.7"
		}
		name := "TIDEMARK_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		got, err := resolveServiceConfig("", func(k string) string {
			if k == name {
				return v
			}
			return ""
		}, nil, defaultServiceConfig())
		if err != nil {
			t.Fatalf("%s=%s: %v", name, v, err)
		}
		if reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s does not change the configuration", name, v)
		}
	})
}
