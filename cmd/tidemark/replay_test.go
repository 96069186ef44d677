package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

func runSub(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// writeApp runs one task per partition of an application with a
// key-value store "inventory" (2 partitions) and a window store "clicks"
// (1 partition), committing their changelogs, and returns the app id.
func writeApp(t *testing.T) string {
	t.Helper()
	return writeAppNamed(t, kafkatest.UniqueName(t, "app"))
}

// writeAppNamed is writeApp with the application id app.
func writeAppNamed(t *testing.T, app string) string {
	t.Helper()
	inv := store.Spec{Name: "inventory", Kind: store.KindKeyValue, Logged: true}
	clicks := store.Spec{Name: "clicks", Kind: store.KindWindow, Logged: true, WindowSize: 60_000, Retention: 3_600_000}
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if err := changelog.EnsureTopics(ctx, adm, changelog.TopicFor(app, inv, 2), changelog.TopicFor(app, clicks, 1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = adm.DeleteTopics(context.Background(), changelog.TopicName(app, inv.Name), changelog.TopicName(app, clicks.Name))
	})
	prod := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	db, err := changelog.OpenDB(t.TempDir(), changelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for p := int32(0); p < 2; p++ {
		task := db.NewTaskState(changelog.TaskStateConfig{AppID: app, Partition: p, Producer: prod})
		s, err := task.Open(inv, p)
		if err != nil {
			t.Fatal(err)
		}
		kv := store.NewTypedKeyValue(s.(store.KeyValue), serde.String(), serde.Int64())
		for i := range 3 {
			if err := kv.Put("sku-"+string(rune('a'+int(p)*3+i)), int64(10*p)+int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if p == 0 {
			s, err := task.Open(clicks, 0)
			if err != nil {
				t.Fatal(err)
			}
			w := store.NewTypedWindow(s.(store.Window), serde.String(), serde.Int64())
			_ = w.Put("user-1", 0, 3)
			_ = w.Put("user-1", 60_000, 4)
		}
		offs, err := task.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Apply(offs); err != nil {
			t.Fatal(err)
		}
	}
	return app
}

func TestReplayRebuildsEveryStoreAndStateReadsThem(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app := writeApp(t)
	dir := t.TempDir()
	out, err := runSub(t, newReplayCmd(), "--brokers", brokers, "--application", app, "--dir", dir, "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "replayed 8 records") || !strings.Contains(out, "3 store partitions") {
		t.Fatalf("replay output %q", out)
	}

	out, err = runSub(t, newStateCmd(), "list", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"clicks\tpartition 0\twindow", "inventory\tpartition 0\tkey-value", "inventory\tpartition 1\tkey-value"} {
		if !strings.Contains(out, want) {
			t.Fatalf("state list = %q, missing %q", out, want)
		}
	}
	out, err = runSub(t, newStateCmd(), "get", "--dir", dir, "--store", "inventory", "--partition", "1",
		"--key-serde", "string", "--value-serde", "int64", "sku-e")
	if err != nil || out != "\"sku-e\"\t11\n" {
		t.Fatalf("state get = %q, %v", out, err)
	}
	// Without --partition: every partition, in order.
	out, err = runSub(t, newStateCmd(), "get", "--dir", dir, "--store", "inventory", "--key-serde", "string", "--value-serde", "int64", "sku-e")
	if err != nil || out != "\"sku-e\"\t11\n" {
		t.Fatalf("state get without --partition = %q, %v", out, err)
	}
	out, err = runSub(t, newStateCmd(), "scan", "--dir", dir, "--store", "inventory", "--key-serde", "string", "--value-serde", "int64")
	if want := "\"sku-a\"\t0\n\"sku-b\"\t1\n\"sku-c\"\t2\n\"sku-d\"\t10\n\"sku-e\"\t11\n\"sku-f\"\t12\n"; err != nil || out != want {
		t.Fatalf("state scan of every partition = %q, %v; want %q", out, err, want)
	}
	if _, err = runSub(t, newStateCmd(), "get", "--dir", dir, "--store", "inventory", "--key-serde", "string", "sku-z"); err == nil ||
		!strings.Contains(err.Error(), "not found in any partition") {
		t.Fatalf("state get of a missing key = %v", err)
	}
	out, err = runSub(t, newStateCmd(), "scan", "--dir", dir, "--store", "clicks", "--key-serde", "string", "--value-serde", "int64")
	if err != nil || out != "\"user-1\"\t@0\t3\n\"user-1\"\t@60000\t4\n" {
		t.Fatalf("state scan of the window store = %q, %v", out, err)
	}
	out, err = runSub(t, newStateCmd(), "scan", "--dir", dir, "--store", "inventory", "--limit", "1")
	if err != nil || out != "0x736b752d61\t0x0000000000000000\n" {
		t.Fatalf("raw scan = %q, %v", out, err)
	}

	_, err = runSub(t, newStateCmd(), "get", "--dir", dir, "--store", "inventroy", "x")
	if err == nil || !strings.Contains(err.Error(), "stores present: clicks (partition 0), inventory (partition 0), inventory (partition 1)") {
		t.Fatalf("state get of a wrong store name = %v", err)
	}
}

// TestReplayLeavesOutALongerApplicationsChangelogs: with applications
// "X" and "X-eu" on one cluster, "X-eu-inventory-changelog" is named like a
// changelog of X's store "eu-inventory". Replaying X used to rebuild
// X-eu's stores into X's directory as eu-inventory and eu-clicks; as with
// tidemark reset, a topic that fits an existing longer group is left out.
func TestReplayLeavesOutALongerApplicationsChangelogs(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app := writeApp(t)
	eu := writeAppNamed(t, app+"-eu")
	// The group of X-eu exists once it committed offsets.
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: eu + "-inventory-changelog", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, eu, offs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteGroup(context.Background(), eu) })

	dir := t.TempDir()
	out, err := runSub(t, newReplayCmd(), "--brokers", brokers, "--application", app, "--dir", dir, "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "replayed 8 records") || !strings.Contains(out, "3 store partitions") {
		t.Fatalf("replay of %s: %q, want its own 8 records in 3 store partitions", app, out)
	}
	out, err = runSub(t, newStateCmd(), "list", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "eu-") {
		t.Fatalf("replay of %s rebuilt %s's stores:\n%s", app, eu, out)
	}
	// Asked for by name, the store is replayed.
	if _, err := runSub(t, newReplayCmd(), "--brokers", brokers, "--application", app, "--store", "eu-inventory", "--dir", t.TempDir(), "--quiet"); err != nil {
		t.Fatalf("replay --store eu-inventory: %v", err)
	}
}

func TestReplayErrorsNameWhatIsWrong(t *testing.T) {
	t.Run("unreachable broker names the address", func(t *testing.T) {
		_, err := runSub(t, newReplayCmd(), "--brokers", "127.0.0.1:1", "--dial-timeout", "300ms", "--application", "a", "--dir", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "cannot reach Kafka broker 127.0.0.1:1") {
			t.Fatalf("replay against a closed port = %v", err)
		}
	})
	t.Run("missing topic lists the app's changelogs", func(t *testing.T) {
		brokers := strings.Join(kafkatest.Brokers(t), ",")
		app := writeApp(t)
		_, err := runSub(t, newReplayCmd(), "--brokers", brokers, "--application", app, "--store", "nope", "--dir", t.TempDir(), "--quiet")
		want := "changelog topic " + app + "-nope-changelog does not exist; changelog topics of app \"" + app + "\": clicks, inventory"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("replay of a missing store = %v\nwant it to contain %q", err, want)
		}
	})
	t.Run("missing flags", func(t *testing.T) {
		if _, err := runSub(t, newReplayCmd(), "--brokers", "x:1", "--dir", "d"); err == nil || !strings.Contains(err.Error(), "--application is required") {
			t.Fatalf("replay without --application = %v", err)
		}
		// The old spelling still names the application.
		if _, err := runSub(t, newReplayCmd(), "--brokers", "x:1", "--app", "a"); err == nil || !strings.Contains(err.Error(), "--dir is required") {
			t.Fatalf("replay --app a without --dir = %v", err)
		}
		if _, err := runSub(t, newStateCmd(), "scan", "--dir", t.TempDir(), "--store", "s", "--key-serde", "avro"); err == nil ||
			!strings.Contains(err.Error(), `--key-serde "avro": want one of`) {
			t.Fatalf("state with an unknown serde = %v", err)
		}
	})
}

// Replaying application A into the state directory of application B (an
// instance's <state-dir>/B) merged A's changelogs into B's task DBs, under
// B's store names, and re-registered B's stores with A's changelog
// topics: B's local state then held A's data. replay refuses, changing
// nothing, and a directory it creates records A as its owner.
func TestReplayRefusesAnotherApplicationsStateDir(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app := writeApp(t)
	other := t.TempDir()
	db, err := changelog.OpenDB(other, changelog.Options{Owner: changelog.Owner{Application: "someone-else"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = runSub(t, newReplayCmd(), "--brokers", brokers, "--application", app, "--dir", other, "--quiet")
	if err == nil || !strings.Contains(err.Error(), "another application") {
		t.Fatalf("replay of %s into someone-else's state dir = %v, want a refusal", app, err)
	}
	out, err := runSub(t, newStateCmd(), "list", "--dir", other)
	if err != nil || out != "no stores in "+other+"\n" {
		t.Fatalf("after the refused replay, state list = %q, %v; want no stores", out, err)
	}

	// A new directory becomes app's: replaying app again updates it, and
	// another application is refused there too.
	dir := t.TempDir()
	for range 2 {
		if _, err := runSub(t, newReplayCmd(), "--brokers", brokers, "--application", app, "--dir", dir, "--quiet"); err != nil {
			t.Fatalf("replay into its own directory: %v", err)
		}
	}
	if _, err := runSub(t, newReplayCmd(), "--brokers", brokers, "--application", writeApp(t), "--dir", dir, "--quiet"); err == nil {
		t.Fatalf("replay of a second application into %s's directory succeeded", app)
	}
}
