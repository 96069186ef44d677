package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/security"
	"github.com/tidemark-streams/tidemark/topology"
)

// serviceConfig is the configuration of `tidemark run`, from a YAML or
// JSON file, then TIDEMARK_* environment variables, then flags (each
// later source overrides the earlier). Durations are Go duration strings
// ("250ms", "1m"), kept as strings until validate so an error can name the
// field and quote what was given. StateDir is a parent directory: the
// instance's state lives in <state_dir>/<application>, the directory
// processor.WithStateDir names.
type serviceConfig struct {
	Application     string   `yaml:"application" json:"application"`
	Brokers         []string `yaml:"brokers" json:"brokers"`
	StateDir        string   `yaml:"state_dir" json:"state_dir"`
	HTTP            string   `yaml:"http" json:"http"`
	AdvertisedHTTP  string   `yaml:"advertised_http" json:"advertised_http"`
	InstanceID      string   `yaml:"instance_id" json:"instance_id"`
	Pipelines       []string `yaml:"pipelines" json:"pipelines"`
	Guarantee       string   `yaml:"guarantee" json:"guarantee"`
	CommitPolicy    string   `yaml:"commit_policy" json:"commit_policy"`
	CommitInterval  string   `yaml:"commit_interval" json:"commit_interval"`
	StalenessTarget string   `yaml:"staleness_target" json:"staleness_target"`
	// TenantClasses sets per-tenant staleness targets and rate limits by
	// class (run_tenants.go).
	TenantClasses map[string]tenantClassConfig `yaml:"tenant_classes" json:"tenant_classes"`
	// Apps runs several applications in one process, each entry a partial
	// config over these settings (run_apps.go). File only.
	Apps            []json.RawMessage `yaml:"apps" json:"apps"`
	DeadLetterTopic string            `yaml:"dead_letter_topic" json:"dead_letter_topic"`
	SkipUndecodable bool              `yaml:"skip_undecodable" json:"skip_undecodable"`
	TopicPrefix     string            `yaml:"topic_prefix" json:"topic_prefix"`
	CreateTopics    bool              `yaml:"create_topics" json:"create_topics"`
	Partitions      int32             `yaml:"partitions" json:"partitions"`
	FraudThreshold  int64             `yaml:"fraud_threshold" json:"fraud_threshold"`
	ShipWithin      string            `yaml:"ship_within" json:"ship_within"`
	Grace           string            `yaml:"grace" json:"grace"`
	PriceHistory    string            `yaml:"price_history" json:"price_history"`
	CartTTL         string            `yaml:"cart_ttl" json:"cart_ttl"`
	CartTotalsEvery string            `yaml:"cart_totals_every" json:"cart_totals_every"`
	LogLevel        string            `yaml:"log_level" json:"log_level"`
	// Security is TLS and SASL for every connection to the brokers.
	Security security.Config `yaml:"security" json:"security"`
	// Standbys, warm-ups, snapshots and fair scheduling (run_ha.go); its
	// fields sit at the top level of the file.
	haConfig
}

// defaultServiceConfig documents every default in one place.
func defaultServiceConfig() serviceConfig {
	return serviceConfig{
		Application:  "tidemark-marketplace",
		StateDir:     "tidemark-state",
		HTTP:         ":8080",
		Pipelines:    append([]string(nil), pipelines.All...),
		Guarantee:    "exactly_once",
		CommitPolicy: string(frontier.PolicyAdaptive),
		Partitions:   6,
		LogLevel:     "info",
	}
}

// loadConfigFile reads path over cfg; unknown fields are errors, so a typo
// does not silently keep a default.
func loadConfigFile(path string, cfg *serviceConfig) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".json" {
		// YAML goes through JSON: encoding/json's errors name the field
		// ("struct field serviceConfig.partitions"); yaml's give a line.
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("config file %s: %w", path, err)
		}
		if m == nil {
			return nil // an empty file keeps the defaults
		}
		if field := nonFinite(m, ""); field != "" {
			// JSON has no NaN or infinity: json.Marshal's error named no
			// field ("json: unsupported value: NaN").
			return fmt.Errorf("config file %s: %s: want a finite number, got %s", path, field, nonFiniteValue(m, field))
		}
		if b, err = json.Marshal(m); err != nil {
			return fmt.Errorf("config file %s: %w", path, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w", path, describeDecodeError(err))
	}
	return nil
}

// describeDecodeError says what a field wants in the file's terms: the
// decoder's own message names Go types ("Go struct field
// serviceConfig.partitions of type int"), which an operator cannot act on.
func describeDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return err
	}
	return fmt.Errorf("%s: want %s, got %s", te.Field, configKind(te.Type), te.Value)
}

func configKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// applyEnv overrides cfg with the TIDEMARK_* variables that are set.
func applyEnv(cfg *serviceConfig, getenv func(string) string) error {
	str := map[string]*string{
		"TIDEMARK_APPLICATION": &cfg.Application, "TIDEMARK_STATE_DIR": &cfg.StateDir, "TIDEMARK_HTTP": &cfg.HTTP,
		"TIDEMARK_ADVERTISED_HTTP": &cfg.AdvertisedHTTP, "TIDEMARK_INSTANCE_ID": &cfg.InstanceID,
		"TIDEMARK_GUARANTEE": &cfg.Guarantee, "TIDEMARK_COMMIT_POLICY": &cfg.CommitPolicy,
		"TIDEMARK_COMMIT_INTERVAL": &cfg.CommitInterval, "TIDEMARK_STALENESS_TARGET": &cfg.StalenessTarget,
		"TIDEMARK_DEAD_LETTER_TOPIC": &cfg.DeadLetterTopic, "TIDEMARK_TOPIC_PREFIX": &cfg.TopicPrefix,
		"TIDEMARK_SHIP_WITHIN": &cfg.ShipWithin, "TIDEMARK_GRACE": &cfg.Grace, "TIDEMARK_LOG_LEVEL": &cfg.LogLevel,
		"TIDEMARK_PRICE_HISTORY": &cfg.PriceHistory, "TIDEMARK_CART_TTL": &cfg.CartTTL, "TIDEMARK_CART_TOTALS_EVERY": &cfg.CartTotalsEvery,
		"TIDEMARK_TLS_CA_FILE": &cfg.Security.TLS.CAFile, "TIDEMARK_TLS_CERT_FILE": &cfg.Security.TLS.CertFile,
		"TIDEMARK_TLS_KEY_FILE": &cfg.Security.TLS.KeyFile, "TIDEMARK_TLS_SERVER_NAME": &cfg.Security.TLS.ServerName,
		"TIDEMARK_SASL_MECHANISM": &cfg.Security.SASL.Mechanism, "TIDEMARK_SASL_USERNAME": &cfg.Security.SASL.Username,
	}
	for k, p := range str {
		if v := getenv(k); v != "" {
			*p = v
		}
	}
	// A password source from the environment replaces the file's rather
	// than clash with it.
	sasl := &cfg.Security.SASL
	if v := getenv("TIDEMARK_SASL_PASSWORD_ENV"); v != "" {
		sasl.Password, sasl.PasswordFile, sasl.PasswordEnv = "", "", v
	}
	if v := getenv("TIDEMARK_SASL_PASSWORD_FILE"); v != "" {
		sasl.Password, sasl.PasswordEnv, sasl.PasswordFile = "", "", v
	}
	if v := getenv("TIDEMARK_BROKERS"); v != "" {
		cfg.Brokers = splitList(v)
	}
	if v := getenv("TIDEMARK_PIPELINES"); v != "" {
		cfg.Pipelines = splitList(v)
	}
	for k, p := range map[string]*bool{"TIDEMARK_CREATE_TOPICS": &cfg.CreateTopics, "TIDEMARK_SKIP_UNDECODABLE": &cfg.SkipUndecodable,
		"TIDEMARK_TLS": &cfg.Security.TLS.Enabled, "TIDEMARK_TLS_INSECURE_SKIP_VERIFY": &cfg.Security.TLS.InsecureSkipVerify} {
		if v := getenv(k); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want true or false", k, v)
			}
			*p = b
		}
	}
	if err := applyHAEnv(&cfg.haConfig, getenv); err != nil {
		return err
	}
	if v := getenv("TIDEMARK_PARTITIONS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("TIDEMARK_PARTITIONS=%q: want an integer", v)
		}
		cfg.Partitions = int32(n)
	}
	if v := getenv("TIDEMARK_FRAUD_THRESHOLD"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("TIDEMARK_FRAUD_THRESHOLD=%q: want an integer", v)
		}
		cfg.FraudThreshold = n
	}
	return nil
}

// service is a validated serviceConfig, ready to run.
type service struct {
	cfg       serviceConfig
	names     []string
	pipelines pipelines.Config
	commit    frontier.Options
	guarantee processor.Guarantee
	apps      []*service // the apps: list, when given (run_apps.go)
}

func parseDuration(field, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("config: %s %q: want a non-negative duration such as 250ms or 1m", field, v)
	}
	return d, nil
}

// validate checks every field, naming the one at fault and what it accepts.
func (c serviceConfig) validate() (*service, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("config: brokers is required (flag --brokers, env TIDEMARK_BROKERS, or brokers: in the config file)")
	}
	for _, b := range c.Brokers {
		// Not a URL: "http://host:9092" was retried for a minute as a
		// host name that never resolves.
		if _, port, err := net.SplitHostPort(b); err != nil || strings.Contains(b, "/") || port == "" {
			return nil, fmt.Errorf("config: brokers %q: want host:port, such as localhost:9092 (no scheme)", b)
		}
	}
	if len(c.Apps) > 0 {
		apps, err := c.validateApps()
		if err != nil {
			return nil, err
		}
		return &service{cfg: c, apps: apps}, nil
	}
	return c.validateOffline()
}

// validateOffline is validate without the brokers, which only a run
// needs: `tidemark describe` builds the topology without Kafka.
func (c serviceConfig) validateOffline() (*service, error) {
	s := &service{cfg: c}
	if c.Application == "" {
		return nil, errors.New("config: application must not be empty")
	}
	if err := topology.CheckApplicationID(c.Application); err != nil {
		return nil, fmt.Errorf("config: application: %w", err)
	}
	if c.InstanceID != "" {
		if err := processor.CheckInstanceID(c.InstanceID, c.Threads); err != nil {
			return nil, fmt.Errorf("config: instance_id: %w", err)
		}
	}
	names, err := pipelines.ParseNames(strings.Join(c.Pipelines, ","))
	if err != nil {
		return nil, fmt.Errorf("config: pipelines: %w", err)
	}
	s.names = names
	if s.guarantee, err = processor.ParseGuarantee(c.Guarantee); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if s.commit, err = c.commitOptions(); err != nil {
		return nil, err
	}
	if s.commit.Tenants, err = c.tenantOptions(); err != nil {
		return nil, err
	}
	if err := s.commit.Validate(); err != nil {
		return nil, fmt.Errorf("config: commit_policy/commit_interval/staleness_target/tenant_classes: %w", err)
	}
	if err := c.haConfig.validate(); err != nil {
		return nil, err
	}
	if d, _ := c.haConfig.peerDeadAfter(); d > 0 && c.HTTP == "" {
		return nil, fmt.Errorf("config: peer_dead_after %s needs http: the detector watches the other instances' HTTP ports (set http, or peer_dead_after: off)", d)
	}
	if c.Partitions < 1 || c.Partitions > 10000 {
		return nil, fmt.Errorf("config: partitions %d: accepted range 1..10000", c.Partitions)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return nil, fmt.Errorf("config: log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.DeadLetterTopic != "" && c.SkipUndecodable {
		return nil, errors.New("config: dead_letter_topic and skip_undecodable exclude each other: undecodable records are either dead-lettered or dropped")
	}
	p := pipelines.Config{FraudThreshold: c.FraudThreshold, SkipUndecodable: c.SkipUndecodable,
		Inputs: gen.DefaultTopics.WithPrefix(c.TopicPrefix), Outputs: pipelines.DefaultOutputs.WithPrefix(c.TopicPrefix)}
	if p.ShipWithin, err = positiveDuration("ship_within", c.ShipWithin); err != nil {
		return nil, err
	}
	if p.Grace, err = parseDuration("grace", c.Grace); err != nil {
		return nil, err
	}
	if c.Grace != "" && p.Grace == 0 {
		// pipelines.Config reads a zero Grace as its 5s default: taken
		// as given, "grace: 0s" silently ran with 5s of lateness.
		return nil, fmt.Errorf("config: grace %q: the pipelines need a positive grace, such as 1ms (leave it unset for 5s)", c.Grace)
	}
	if p.PriceHistory, err = positiveDuration("price_history", c.PriceHistory); err != nil {
		return nil, err
	}
	if p.CartTTL, err = positiveDuration("cart_ttl", c.CartTTL); err != nil {
		return nil, err
	}
	if p.CartTotalsEvery, err = positiveDuration("cart_totals_every", c.CartTotalsEvery); err != nil {
		return nil, err
	}
	if c.FraudThreshold < 0 {
		return nil, fmt.Errorf("config: fraud_threshold %d: must be ≥ 1 (0 keeps the default)", c.FraudThreshold)
	}
	if err := p.EnsureDefaults().ValidateNamed(pipelineKey); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.Security.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	s.pipelines = p
	return s, nil
}

// pipelineKeys are the config keys of the pipelines.Config fields a run
// config sets, so that a parameter's error names the key its user wrote.
var pipelineKeys = map[string]string{
	"FraudThreshold": "fraud_threshold", "ShipWithin": "ship_within", "Grace": "grace",
	"PriceHistory": "price_history", "CartTTL": "cart_ttl", "CartTotalsEvery": "cart_totals_every",
}

// pipelineKey names pipelines.Config's field as a config key ("" for the
// fields a run config does not set).
func pipelineKey(field string) string { return pipelineKeys[field] }

// jsonKind names what raw holds, for an error that says what was given.
func jsonKind(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid JSON"
	}
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	case nil:
		return "nothing"
	}
	return "a mapping"
}
