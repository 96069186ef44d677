package changelog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidemark-streams/tidemark/store"
)

// ErrChangelogMismatch is wrapped by *MismatchError.
var ErrChangelogMismatch = errors.New("changelog topic does not match its store")

// ErrTopicNotFound means a changelog topic a restore or replay needs does
// not exist.
var ErrTopicNotFound = errors.New("changelog topic not found")

// MismatchError says how an existing changelog topic differs from what its
// store needs. Processing must not start: restoring from a topic with
// another partition count would mix keys of several tasks, and one that is
// not compacted loses state.
type MismatchError struct {
	Topic    string
	Field    string // "partitions" or "cleanup.policy"
	Expected string
	Actual   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("changelog topic %s: %s is %s, expected %s", e.Topic, e.Field, e.Actual, e.Expected)
}

func (e *MismatchError) Unwrap() error { return ErrChangelogMismatch }

// Topic is a changelog topic to create or validate.
type Topic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16 // -1: the broker's default
	Configs           map[string]string
}

// windowChangelogExtraRetention is added to a window or session store's
// retention for its changelog's retention.ms, like Kafka Streams'
// windowstore.changelog.additional.retention.ms: stream time and wall
// clock drift apart, and the changelog must outlive what the store keeps.
const windowChangelogExtraRetention = 24 * 60 * 60 * 1000

// TopicFor returns the changelog topic of spec for an application whose
// task count (the sub-topology's input partitions) is partitions.
// Key-value stores get cleanup.policy=compact; window and session stores
// compact,delete with a retention.ms covering the store's retention; then
// spec.ChangelogConfig overrides any of it.
func TopicFor(appID string, spec store.Spec, partitions int32) Topic {
	cfg := map[string]string{}
	switch spec.Kind {
	case store.KindKeyValue:
		cfg["cleanup.policy"] = "compact"
	default:
		cfg["cleanup.policy"] = "compact,delete"
		cfg["retention.ms"] = strconv.FormatInt(spec.Retention+spec.WindowSize+windowChangelogExtraRetention, 10)
	}
	for k, v := range spec.ChangelogConfig {
		cfg[k] = v
	}
	return Topic{Name: TopicName(appID, spec.Name), Partitions: partitions, ReplicationFactor: -1, Configs: cfg}
}

// CreateTopic creates t. created is false when the topic already existed
// (another instance won the race), which is not an error.
func CreateTopic(ctx context.Context, adm *kadm.Client, t Topic) (created bool, err error) {
	cfg := make(map[string]*string, len(t.Configs))
	for k, v := range t.Configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(ctx, t.Partitions, t.ReplicationFactor, cfg, t.Name)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("changelog: create topic %s (%d partitions, %v): %w", t.Name, t.Partitions, t.Configs, err)
	}
	return true, nil
}

// EnsureTopics creates the changelog topics that do not exist and validates
// those that do (partition count and cleanup policy). It returns every
// mismatch found, joined; each is a *MismatchError. Call it at startup,
// before any task processes.
func EnsureTopics(ctx context.Context, adm *kadm.Client, topics ...Topic) error {
	if len(topics) == 0 {
		return nil
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("changelog: list changelog topics: %w", err)
	}
	for _, t := range topics {
		d, ok := details[t.Name]
		if ok && d.Err == nil {
			continue
		}
		if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("changelog: describe topic %s: %w", t.Name, d.Err)
		}
		if _, err := CreateTopic(ctx, adm, t); err != nil {
			return err
		}
	}
	// Validating the topics just created too waits until the broker
	// serves them, so a restore right after EnsureTopics finds them.
	return validate(ctx, adm, topics)
}

// settle is how long validate waits for a topic created moments ago (by
// this or another instance) to show its partitions and configs: brokers
// learn new topics from the controller asynchronously.
const settle = 10 * time.Second

func validate(ctx context.Context, adm *kadm.Client, topics []Topic) error {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	deadline := time.Now().Add(settle)
	// kadm answers ListTopics from the client's metadata cache, which may
	// predate a topic created a moment ago; asking for authorized
	// operations makes it issue a fresh Metadata request.
	fresh := kadm.WithAuthorizedOps(ctx)
	for {
		details, err := adm.ListTopics(fresh, names...)
		if err != nil {
			return fmt.Errorf("changelog: list changelog topics: %w", err)
		}
		configs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return fmt.Errorf("changelog: describe changelog topic configs: %w", err)
		}
		if settled(details, configs, names) || time.Now().After(deadline) {
			return compare(topics, details, configs)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("changelog: validate changelog topics: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func settled(details kadm.TopicDetails, configs kadm.ResourceConfigs, names []string) bool {
	for _, n := range names {
		d, ok := details[n]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			return false
		}
		if rc, err := configs.On(n, nil); err != nil || len(rc.Configs) == 0 {
			return false
		}
	}
	return true
}

func compare(topics []Topic, details kadm.TopicDetails, configs kadm.ResourceConfigs) error {
	var errs []error
	for _, t := range topics {
		if n := int32(len(details[t.Name].Partitions)); n != t.Partitions {
			errs = append(errs, &MismatchError{t.Name, "partitions", strconv.Itoa(int(t.Partitions)), strconv.Itoa(int(n))})
		}
		rc, err := configs.On(t.Name, nil)
		if err != nil {
			return fmt.Errorf("changelog: describe configs of %s: %w", t.Name, err)
		}
		actual := "delete" // Kafka's default
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				actual = *c.Value
			}
		}
		if want := t.Configs["cleanup.policy"]; !samePolicy(want, actual) {
			errs = append(errs, &MismatchError{t.Name, "cleanup.policy", want, actual})
		}
	}
	return errors.Join(errs...)
}

// samePolicy compares cleanup policies as sets: "delete,compact" is
// "compact,delete".
func samePolicy(a, b string) bool {
	norm := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		sort.Strings(out)
		return out
	}
	return slices.Equal(norm(a), norm(b))
}
