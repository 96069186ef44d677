package main

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

func init() { rootCmd.AddCommand(newStateCmd()) }

type stateFlags struct {
	dir        string
	store      string
	partition  int32
	keySerde   string
	valueSerde string
	timestamp  bool
	from, to   string
	limit      int
}

// newStateCmd builds `tidemark state` and its subcommands afresh, so tests
// get clean flag state.
func newStateCmd() *cobra.Command {
	var f stateFlags
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Inspect the stores in a local state directory",
		Long: `state reads a state directory (of a stopped instance, or one built with
'tidemark replay') and prints stores, keys and values: applied state only,
never the uncommitted writes of a running task.

Keys and values are decoded with --key-serde and --value-serde: string, int64,
float64, json or bytes (hex). Without a serde they print as hex. Keys given on
the command line are encoded with the key serde (hex for bytes). The DSL's
tables and aggregations store each value after the 8-byte timestamp of the
record that last updated it: --timestamped decodes the value after it and
prints the timestamp as ts=<ms>. get and scan read every partition of the
store unless --partition names one.`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.dir, "dir", "", "state directory (required)")
	pf.StringVar(&f.store, "store", "", "store name")
	pf.Int32Var(&f.partition, "partition", -1, "store partition (-1: every partition)")
	pf.BoolVar(&f.timestamp, "timestamped", false, "values start with an 8-byte timestamp (DSL tables and aggregations)")
	pf.StringVar(&f.keySerde, "key-serde", "bytes", "key serde: string, int64, float64, json, bytes")
	pf.StringVar(&f.valueSerde, "value-serde", "bytes", "value serde: string, int64, float64, json, bytes")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the stores and partitions in the directory",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runStateList(cmd, f) },
	}
	get := &cobra.Command{
		Use:     "get KEY",
		Short:   "Print a key's value (key-value stores), windows or sessions",
		Example: `  tidemark state get --dir ./state --store inventory --key-serde string --value-serde int64 sku-42`,
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return runStateScan(cmd, f, &args[0]) },
	}
	scan := &cobra.Command{
		Use:     "scan",
		Short:   "Print the entries of a store in key order",
		Example: `  tidemark state scan --dir ./state --store inventory --key-serde string --from sku-1 --to sku-2 --limit 20`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runStateScan(cmd, f, nil) },
	}
	scan.Flags().StringVar(&f.from, "from", "", "first key (key-value stores; inclusive)")
	scan.Flags().StringVar(&f.to, "to", "", "end key (key-value stores; exclusive)")
	scan.Flags().IntVar(&f.limit, "limit", 0, "print at most this many entries (0: all)")
	cmd.AddCommand(list, get, scan)
	return cmd
}

func openStateDir(cmd *cobra.Command, dir string) (*changelog.DB, error) {
	if dir == "" {
		return nil, errors.New("--dir is required: the state directory to read")
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
	db, err := changelog.OpenDB(dir, changelog.Options{ReadOnly: true, KeepCorrupt: true, Logger: logger})
	if err != nil {
		return nil, stateDirHint(dir, err)
	}
	return db, nil
}

func runStateList(cmd *cobra.Command, f stateFlags) error {
	db, err := openStateDir(cmd, f.dir)
	if err != nil {
		return err
	}
	defer db.Close()
	stores, err := db.Stores()
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if len(stores) == 0 {
		fmt.Fprintf(w, "no stores in %s\n", f.dir)
		return nil
	}
	for _, s := range stores {
		off := "-"
		if a, ok, err := db.AppliedOffset(changelog.TopicPartition{Topic: s.Topic, Partition: s.Partition}); err == nil && ok {
			off = strconv.FormatInt(a.Offset, 10)
		}
		fmt.Fprintf(w, "%s\tpartition %d\t%s\tchangelog %s\tapplied offset %s\ttask %s\n", s.Name, s.Partition, s.Kind, s.Topic, off, orDash(s.Task))
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runStateScan(cmd *cobra.Command, f stateFlags, key *string) error {
	ks, err := stateCodecFor(f.keySerde, "--key-serde")
	if err != nil {
		return err
	}
	vs, err := stateCodecFor(f.valueSerde, "--value-serde")
	if err != nil {
		return err
	}
	if f.store == "" {
		return errors.New("--store is required (see 'tidemark state list')")
	}
	db, err := openStateDir(cmd, f.dir)
	if err != nil {
		return err
	}
	defer db.Close()
	infos, err := findStateStores(db, f.store, f.partition, f.dir)
	if err != nil {
		return err
	}
	var opts changelog.ScanOptions
	if key != nil {
		if opts.Key, err = ks.parse(*key); err != nil {
			return fmt.Errorf("key %q: %w", *key, err)
		}
	}
	if f.from != "" {
		if opts.From, err = ks.parse(f.from); err != nil {
			return fmt.Errorf("--from %q: %w", f.from, err)
		}
	}
	if f.to != "" {
		if opts.To, err = ks.parse(f.to); err != nil {
			return fmt.Errorf("--to %q: %w", f.to, err)
		}
	}
	w := cmd.OutOrStdout()
	n := 0
	for _, info := range infos {
		err = db.Scan(info, opts, func(e changelog.Entry) bool {
			printStateEntry(w, info.Kind, e, ks, vs, f.timestamp)
			n++
			return f.limit <= 0 || n < f.limit
		})
		if err != nil {
			return err
		}
		if f.limit > 0 && n >= f.limit {
			break
		}
	}
	if key != nil && n == 0 {
		if f.partition < 0 {
			return fmt.Errorf("key %q not found in any partition of store %q", *key, f.store)
		}
		return fmt.Errorf("key %q not found in store %q partition %d", *key, f.store, f.partition)
	}
	return nil
}

// findStateStores returns the registered partitions of store name, in
// partition order (only partition, unless it is negative), or an error
// listing the stores present.
func findStateStores(db *changelog.DB, name string, partition int32, dir string) ([]changelog.StoreInstance, error) {
	stores, err := db.Stores()
	if err != nil {
		return nil, err
	}
	var names []string
	var found []changelog.StoreInstance
	seen := map[string]bool{}
	for _, s := range stores {
		if s.Name == name && (partition < 0 || s.Partition == partition) {
			found = append(found, s)
		}
		if label := fmt.Sprintf("%s (partition %d)", s.Name, s.Partition); !seen[label] {
			seen[label] = true
			names = append(names, label)
		}
	}
	if len(found) == 0 {
		what := fmt.Sprintf("no store %q", name)
		if partition >= 0 {
			what += fmt.Sprintf(" partition %d", partition)
		}
		return nil, fmt.Errorf("%s in %s; stores present: %s", what, dir, joinOrNone(names))
	}
	slices.SortFunc(found, func(a, b changelog.StoreInstance) int { return cmp.Compare(a.Partition, b.Partition) })
	return found, nil
}

func printStateEntry(w io.Writer, kind store.Kind, e changelog.Entry, ks, vs stateCodec, timestamped bool) {
	k, v := ks.show(e.Key), ""
	if timestamped {
		if len(e.Value) < 8 {
			v = "<no timestamp " + stateHex(e.Value) + ">"
		} else {
			v = vs.show(e.Value[8:]) + "\tts=" + strconv.FormatInt(int64(binary.BigEndian.Uint64(e.Value)), 10)
		}
	} else {
		v = vs.show(e.Value)
	}
	switch kind {
	case store.KindWindow:
		fmt.Fprintf(w, "%s\t@%d\t%s\n", k, e.Start, v)
	case store.KindSession:
		fmt.Fprintf(w, "%s\t[%d,%d]\t%s\n", k, e.Start, e.End, v)
	default:
		fmt.Fprintf(w, "%s\t%s\n", k, v)
	}
}

// stateCodec prints stored bytes with a known serde, and parses command-line
// keys into the bytes that serde would store.
type stateCodec struct {
	show  func([]byte) string
	parse func(string) ([]byte, error)
}

func stateHex(b []byte) string { return "0x" + hex.EncodeToString(b) }

func stateCodecFor(name, flag string) (stateCodec, error) {
	// undecodable bytes print raw, so one bad entry does not hide the rest
	orHex := func(s string, err error, b []byte) string {
		if err != nil {
			return "<undecodable " + stateHex(b) + ">"
		}
		return s
	}
	switch name {
	case "string":
		return stateCodec{
			show:  func(b []byte) string { return strconv.Quote(string(b)) },
			parse: func(s string) ([]byte, error) { return []byte(s), nil },
		}, nil
	case "int64":
		return stateCodec{
			show: func(b []byte) string {
				v, err := serde.Int64().Decode(b)
				return orHex(strconv.FormatInt(v, 10), err, b)
			},
			parse: func(s string) ([]byte, error) {
				v, err := strconv.ParseInt(s, 10, 64)
				return binary.BigEndian.AppendUint64(nil, uint64(v)), err
			},
		}, nil
	case "float64":
		return stateCodec{
			show: func(b []byte) string {
				v, err := serde.Float64().Decode(b)
				return orHex(strconv.FormatFloat(v, 'g', -1, 64), err, b)
			},
			parse: func(s string) ([]byte, error) {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return nil, err
				}
				return serde.Float64().Encode(nil, v) // NaN as the serde writes it
			},
		}, nil
	case "json":
		return stateCodec{
			show: func(b []byte) string {
				var v any
				if err := json.Unmarshal(b, &v); err != nil {
					return orHex("", err, b)
				}
				out, _ := json.Marshal(v)
				return string(out)
			},
			parse: func(s string) ([]byte, error) {
				if !json.Valid([]byte(s)) {
					return nil, errors.New("not valid JSON")
				}
				return []byte(s), nil
			},
		}, nil
	case "bytes", "":
		return stateCodec{
			show: stateHex,
			parse: func(s string) ([]byte, error) {
				return hex.DecodeString(strings.TrimPrefix(s, "0x"))
			},
		}, nil
	}
	return stateCodec{}, fmt.Errorf("%s %q: want one of string, int64, float64, json, bytes", flag, name)
}
