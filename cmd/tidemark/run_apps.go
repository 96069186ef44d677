package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/tidemark-streams/tidemark/processor"
)

// appConfigs expands the config file's apps: list, which runs several
// applications in one process (one per tenant class, say). Each entry is a
// partial config over the top-level settings (after the file, environment
// and flags): fields it names replace the top-level ones for that app
// (tenant_classes and lists as a whole), the rest are inherited.
//
//	brokers: [kafka:9092]
//	apps:
//	  - {application: shop-gold, topic_prefix: gold., http: ":8081", staleness_target: 50ms}
//	  - {application: shop-std, topic_prefix: std., http: ":8082", commit_policy: fixed, commit_interval: 1s}
//
// Every app needs its own application id (its group, state directory
// <state_dir>/<application> and internal topics) and its own http address
// (or none, or port 0); entries cannot nest apps.
func (c serviceConfig) appConfigs() ([]serviceConfig, error) {
	var out []serviceConfig
	for i, raw := range c.Apps {
		app := c
		app.Apps = nil
		app.Brokers, app.Pipelines = slices.Clone(c.Brokers), slices.Clone(c.Pipelines)
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, fmt.Errorf("config: apps[%d]: want a mapping of settings, got %s", i, jsonKind(raw))
		}
		if _, ok := keys["tenant_classes"]; ok {
			app.TenantClasses = nil
		} else {
			app.TenantClasses = maps.Clone(c.TenantClasses)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&app); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config: apps[%d]: %w", i, describeDecodeError(err))
		}
		if len(app.Apps) > 0 {
			return nil, fmt.Errorf("config: apps[%d]: apps cannot nest", i)
		}
		out = append(out, app)
	}
	return out, nil
}

// validateApps validates every app of the apps: list and checks that they
// do not collide.
func (c serviceConfig) validateApps() ([]*service, error) {
	cfgs, err := c.appConfigs()
	if err != nil {
		return nil, err
	}
	var out []*service
	ids, addrs := map[string]int{}, map[string]int{}
	for i, ac := range cfgs {
		s, err := ac.validate()
		if err != nil {
			return nil, fmt.Errorf("apps[%d] (%s): %w", i, ac.Application, err)
		}
		if j, dup := ids[ac.Application]; dup {
			return nil, fmt.Errorf("config: apps[%d] and apps[%d] both have application %q: give each its own", j, i, ac.Application)
		}
		if j, dup := addrs[ac.HTTP]; dup && ac.HTTP != "" && !strings.HasSuffix(ac.HTTP, ":0") {
			return nil, fmt.Errorf("config: apps[%d] and apps[%d] both serve http on %q: give each its own (or \"\")", j, i, ac.HTTP)
		}
		ids[ac.Application], addrs[ac.HTTP] = i, i
		out = append(out, s)
	}
	return out, nil
}

// runApps runs the apps of the apps: list together (processor.RunApps):
// they stop together, and one failing stops the others.
func runApps(ctx context.Context, svcs []*service, logw io.Writer) error {
	var apps []*processor.App
	for _, s := range svcs {
		app, err := s.app(logw)
		if err != nil {
			return fmt.Errorf("run: app %q: %w", s.cfg.Application, err)
		}
		if s.cfg.CreateTopics {
			if err := s.preflight(app); err != nil {
				return fmt.Errorf("app %q: %w", s.cfg.Application, err)
			}
		}
		apps = append(apps, app)
	}
	// Topics once every app passed its checks: one app's taken port must
	// not follow another's created topics.
	for _, s := range svcs {
		if err := s.createTopics(ctx, s.logger(logw)); err != nil {
			return err
		}
	}
	if err := processor.RunApps(ctx, apps...); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}
