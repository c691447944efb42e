package exporter

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/hubble/container"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func podFlow(n int, pod string, v flow.Verdict) *flow.Flow {
	return &flow.Flow{Uuid: fmt.Sprint(n), Time: timestamppb.New(t0.Add(time.Duration(n) * time.Second)), Verdict: v,
		Source:      &flow.Endpoint{Namespace: "default", PodName: pod, Labels: []string{"k8s:app=" + pod}},
		Destination: &flow.Endpoint{Namespace: "default", PodName: "server"}, NodeName: "node-a"}
}

// readLines parses a file's lines as GetFlowsResponses, as `hubble
// observe --input-file` does.
func readLines(t *testing.T, r io.Reader) []*observer.GetFlowsResponse {
	t.Helper()
	var out []*observer.GetFlowsResponse
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		resp := &observer.GetFlowsResponse{}
		if err := protojson.Unmarshal(sc.Bytes(), resp); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, resp)
	}
	return out
}

func readFile(t *testing.T, path string) []*observer.GetFlowsResponse {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	return readLines(t, r)
}

// TestExportFiltersAndMask: the exporter follows the ring and writes what
// the allowlist lets in and the denylist does not keep out, with only the
// mask's fields; the responses carry the flows' time and the node.
func TestExportFiltersAndMask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "flows.log")
	cfg := DefaultConfig
	cfg.HubbleExportFilePath = path
	cfg.HubbleExportAllowlist = `{"verdict":["DROPPED"]} {"source_pod":["default/client"]}`
	cfg.HubbleExportDenylist = `{"source_pod":["default/noisy"]}`
	cfg.HubbleExportFieldmask = []string{"time", "verdict", "source.pod_name"}
	e, err := New(cfg, "node-a", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := container.NewRing(15)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, ring) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// The exporter starts where the ring is when it runs: wait for its
	// file before writing.
	testenv.Eventually(t, 5*time.Second, func() error { _, err := os.Stat(path); return err })
	ring.Write(container.Event{Flow: podFlow(1, "client", flow.Verdict_FORWARDED)})                 // allowed by pod
	ring.Write(container.Event{Flow: podFlow(2, "other", flow.Verdict_FORWARDED)})                  // in neither
	ring.Write(container.Event{Flow: podFlow(3, "other", flow.Verdict_DROPPED)})                    // allowed by verdict
	ring.Write(container.Event{Flow: podFlow(4, "noisy", flow.Verdict_DROPPED)})                    // denied
	ring.Write(container.Event{Lost: &flow.LostEvent{NumEventsLost: 3, Last: timestamppb.New(t0)}}) // a record of loss
	var got []*observer.GetFlowsResponse
	testenv.Eventually(t, 5*time.Second, func() error {
		got = readFile(t, path)
		if len(got) < 3 {
			return fmt.Errorf("%d lines", len(got))
		}
		return nil
	})
	var lines []string
	for _, r := range got {
		if l := r.GetLostEvents(); l != nil {
			lines = append(lines, fmt.Sprintf("lost %d", l.GetNumEventsLost()))
			continue
		}
		f := r.GetFlow()
		if f.GetSource().GetNamespace() != "" || f.GetSource().GetLabels() != nil || f.GetDestination() != nil || f.GetUuid() != "" {
			t.Errorf("fields outside the mask: %v", f)
		}
		if r.GetNodeName() != "node-a" || !r.GetTime().AsTime().Equal(f.GetTime().AsTime()) {
			t.Errorf("response node %q time %v", r.GetNodeName(), r.GetTime())
		}
		lines = append(lines, f.GetSource().GetPodName()+" "+f.GetVerdict().String())
	}
	if want := []string{"client FORWARDED", "other DROPPED", "lost 3"}; !slices.Equal(lines, want) {
		t.Errorf("exported %q, want %q", lines, want)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("export file mode: %v, %v", st, err)
	}
}

// TestRotation: at the size limit the file becomes a backup, only the
// newest backups stay, and no line is split across files.
func TestRotation(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "flows.log")
			r, err := OpenRotating(path, 100, 2, compress)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			clock := t0
			r.now = func() time.Time { clock = clock.Add(time.Second); return clock }
			line := func(i int) []byte {
				b, _ := protojson.Marshal(&observer.GetFlowsResponse{NodeName: fmt.Sprintf("n%02d", i)})
				return append(b, '\n') // 18 bytes: 5 lines to a file
			}
			for i := range 23 {
				if _, err := r.Write(line(i)); err != nil {
					t.Fatal(err)
				}
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			ext := ""
			if compress {
				ext = ".gz"
			}
			// 23 lines: four full files rotated, two of them kept, and the
			// current one with the last three.
			want := []string{"flows-2026-12-03T10-00-03.000.log" + ext, "flows-2026-12-03T10-00-04.000.log" + ext, "flows.log"}
			if !slices.Equal(names, want) {
				t.Fatalf("files %q, want %q", names, want)
			}
			nodes := func(p string) string {
				var s []string
				for _, r := range readFile(t, filepath.Join(dir, p)) {
					s = append(s, r.GetNodeName())
				}
				return strings.Join(s, ",")
			}
			if got := nodes(want[0]); got != "n10,n11,n12,n13,n14" {
				t.Errorf("older backup %s", got)
			}
			if got := nodes(want[1]); got != "n15,n16,n17,n18,n19" {
				t.Errorf("newer backup %s", got)
			}
			if got := nodes("flows.log"); got != "n20,n21,n22" {
				t.Errorf("current %s", got)
			}
			// Reopened, it goes on where the file is.
			r.Close()
			r, err = OpenRotating(path, 100, 2, compress)
			if err != nil {
				t.Fatal(err)
			}
			r.Write(line(23))
			if got := nodes("flows.log"); got != "n20,n21,n22,n23" {
				t.Errorf("after reopening %s", got)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		tweak func(*Config)
		want  string
	}{
		{func(c *Config) { c.HubbleExportFilePath = "relative.log" }, "--hubble-export-file-path"},
		{func(c *Config) { c.HubbleExportFileMaxSizeMB = 0 }, "--hubble-export-file-max-size-mb 0"},
		{func(c *Config) { c.HubbleExportFileMaxBackups = -1 }, "--hubble-export-file-max-backups -1"},
		{func(c *Config) { c.HubbleExportAllowlist = `{"verdict":["NOPE"]}` }, "--hubble-export-allowlist: FlowFilter 1"},
		{func(c *Config) { c.HubbleExportDenylist = `{"source_pod":["a"]} {"sauce_pod":["b"]}` }, "--hubble-export-denylist: FlowFilter 2"},
		{func(c *Config) { c.HubbleExportDenylist = `{"source_pod":` }, "--hubble-export-denylist: FlowFilter 1"},
		{func(c *Config) { c.HubbleExportAllowlist = `{"source_ip":["not-an-ip"]}` }, "--hubble-export-allowlist"},
		{func(c *Config) { c.HubbleExportFieldmask = []string{"time", "source.pod"} }, `--hubble-export-fieldmask: field mask path "source.pod"`},
	} {
		cfg := DefaultConfig
		cfg.HubbleExportFilePath = "/var/run/cilium/hubble/events.log"
		tc.tweak(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %q", cfg, err, tc.want)
		}
	}
	// Off, nothing is checked; on, Cilium's examples are taken.
	if err := (Config{HubbleExportFieldmask: []string{"nope"}}).Validate(); err != nil {
		t.Errorf("disabled: %v", err)
	}
	cfg := DefaultConfig
	cfg.HubbleExportFilePath = Stdout
	cfg.HubbleExportAllowlist = "{\"verdict\":[\"DROPPED\",\"ERROR\"]}\n{\"source_pod\":[\"kube-system/\"]}"
	cfg.HubbleExportFieldmask = []string{"time", "source", "destination", "verdict"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Cilium's example: %v", err)
	}
}

// TestRotationRecovers: a rotation that fails (the directory went) fails
// the writes, and they work again once a file can be made.
func TestRotationRecovers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "export")
	path := filepath.Join(dir, "flows.log")
	r, err := OpenRotating(path, 10, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("x\n")); err == nil {
		t.Fatal("a write whose rotation cannot rename succeeded")
	}
	if _, err := r.Write([]byte("y\n")); err == nil {
		t.Fatal("a write without a directory succeeded")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("z\n")); err != nil {
		t.Fatalf("after the directory came back: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "z\n" {
		t.Errorf("file %q, %v", b, err)
	}
	r.Close()
	if _, err := r.Write([]byte("after close\n")); err == nil {
		t.Error("a write after Close succeeded")
	}
}
