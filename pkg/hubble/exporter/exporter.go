// Package exporter writes the node's flows to a file, as Cilium's Hubble
// exporter: one JSON GetFlowsResponse a line (which `hubble observe
// --input-file` reads back), the flows an allowlist and a denylist of
// FlowFilters select, only a field mask's fields, the file rotated at a
// size with a number of backups kept, gzipped if asked.
package exporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/fieldmask"
	"github.com/cilium-go/cilium/pkg/hubble/filters"
)

// Config has Cilium's flags and defaults.
type Config struct {
	// HubbleExportFilePath is the file, or "stdout"; empty: no export.
	HubbleExportFilePath       string   `mapstructure:"hubble-export-file-path"`
	HubbleExportFileMaxSizeMB  int      `mapstructure:"hubble-export-file-max-size-mb"`
	HubbleExportFileMaxBackups int      `mapstructure:"hubble-export-file-max-backups"`
	HubbleExportFileCompress   bool     `mapstructure:"hubble-export-file-compress"`
	HubbleExportAllowlist      string   `mapstructure:"hubble-export-allowlist"`
	HubbleExportDenylist       string   `mapstructure:"hubble-export-denylist"`
	HubbleExportFieldmask      []string `mapstructure:"hubble-export-fieldmask"`
}

// DefaultConfig: off; Cilium's size and backups.
var DefaultConfig = Config{HubbleExportFileMaxSizeMB: 10, HubbleExportFileMaxBackups: 5}

// Stdout is the path that writes the flows to the agent's standard output.
const Stdout = "stdout"

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("hubble-export-file-path", d.HubbleExportFilePath,
		"file the node's flows are written to, one JSON GetFlowsResponse a line (`stdout`: the agent's output, not rotated); empty: none")
	fs.Int("hubble-export-file-max-size-mb", d.HubbleExportFileMaxSizeMB, "size in MB at which the export file is rotated")
	fs.Int("hubble-export-file-max-backups", d.HubbleExportFileMaxBackups, "how many rotated export files are kept")
	fs.Bool("hubble-export-file-compress", d.HubbleExportFileCompress, "gzip rotated export files")
	fs.String("hubble-export-allowlist", d.HubbleExportAllowlist,
		`FlowFilters in JSON, one after the other ({"verdict":["DROPPED"]} {"source_pod":["kube-system/"]}): only flows that one matches are exported; empty: all`)
	fs.String("hubble-export-denylist", d.HubbleExportDenylist, "FlowFilters in JSON, as the allowlist: flows that one matches are not exported")
	fs.StringSlice("hubble-export-fieldmask", d.HubbleExportFieldmask, "the flows' fields to export (time,verdict,source.pod_name,...); empty: whole flows")
}

// Enabled says whether flows are exported.
func (c Config) Enabled() bool { return c.HubbleExportFilePath != "" }

// Validate names the first bad flag.
func (c Config) Validate() error {
	_, err := c.compile()
	return err
}

// compiled is what the flags say, checked.
type compiled struct {
	filters *filters.Set
	mask    fieldmask.Mask
}

func (c Config) compile() (compiled, error) {
	if !c.Enabled() {
		return compiled{}, nil
	}
	if c.HubbleExportFilePath != Stdout && !filepath.IsAbs(c.HubbleExportFilePath) {
		return compiled{}, fmt.Errorf("--hubble-export-file-path %q: an absolute path or %q is required", c.HubbleExportFilePath, Stdout)
	}
	if c.HubbleExportFileMaxSizeMB < 1 {
		return compiled{}, fmt.Errorf("--hubble-export-file-max-size-mb %d: want 1 or more", c.HubbleExportFileMaxSizeMB)
	}
	if c.HubbleExportFileMaxBackups < 0 {
		return compiled{}, fmt.Errorf("--hubble-export-file-max-backups %d: want 0 or more", c.HubbleExportFileMaxBackups)
	}
	allow, err := ParseFlowFilters(c.HubbleExportAllowlist)
	if err != nil {
		return compiled{}, fmt.Errorf("--hubble-export-allowlist: %w", err)
	}
	deny, err := ParseFlowFilters(c.HubbleExportDenylist)
	if err != nil {
		return compiled{}, fmt.Errorf("--hubble-export-denylist: %w", err)
	}
	set, err := filters.Compile(allow, deny)
	if err != nil {
		return compiled{}, fmt.Errorf("--hubble-export-allowlist, --hubble-export-denylist: %w", err)
	}
	mask, err := fieldmask.New(c.HubbleExportFieldmask)
	if err != nil {
		return compiled{}, fmt.Errorf("--hubble-export-fieldmask: %w", err)
	}
	return compiled{filters: set, mask: mask}, nil
}

// maxFilters bounds a list: a flag is not a place for thousands.
const maxFilters = 1000

// ParseFlowFilters reads FlowFilters in JSON written one after the other
// (Cilium's format for the allow and deny lists); unknown fields are
// refused.
func ParseFlowFilters(s string) ([]*flow.FlowFilter, error) {
	var out []*flow.FlowFilter
	dec := json.NewDecoder(strings.NewReader(s))
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("FlowFilter %d: %w", len(out)+1, err)
		}
		if len(out) == maxFilters {
			return nil, fmt.Errorf("more than %d FlowFilters", maxFilters)
		}
		ff := &flow.FlowFilter{}
		if err := protojson.Unmarshal(raw, ff); err != nil {
			return nil, fmt.Errorf("FlowFilter %d %s: %w", len(out)+1, raw, err)
		}
		out = append(out, ff)
	}
}

// Exporter writes the flows of a ring as they come.
type Exporter struct {
	cfg  Config
	c    compiled
	node string
	log  *slog.Logger
}

// New checks cfg; node names the flows' node in the lines.
func New(cfg Config, node string, log *slog.Logger) (*Exporter, error) {
	c, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	return &Exporter{cfg: cfg, c: c, node: node, log: log}, nil
}

// Run writes the flows that ring receives from now on until ctx ends;
// where the ring overwrote flows before they were written, a record of
// loss says how many.
func (e *Exporter) Run(ctx context.Context, ring *container.Ring) error {
	var w io.Writer = os.Stdout
	if e.cfg.HubbleExportFilePath != Stdout {
		f, err := OpenRotating(e.cfg.HubbleExportFilePath, int64(e.cfg.HubbleExportFileMaxSizeMB)<<20,
			e.cfg.HubbleExportFileMaxBackups, e.cfg.HubbleExportFileCompress)
		if err != nil {
			return fmt.Errorf("--hubble-export-file-path: %w", err)
		}
		defer f.Close()
		w = f
	}
	e.log.Info("exporting Hubble flows", "path", e.cfg.HubbleExportFilePath)
	_, pos := ring.Bounds()
	failing := false
	for {
		if err := ring.Wait(ctx, pos); err != nil {
			return nil // ctx ended
		}
		ev, lost, ok := ring.At(pos)
		if !ok {
			continue
		}
		if lost > 0 {
			pos += lost
			ev = container.Event{Lost: &flow.LostEvent{Source: flow.LostEventSource_HUBBLE_RING_BUFFER, NumEventsLost: lost,
				Last: timestamppb.Now()}}
		} else {
			pos++
		}
		line, ok, err := e.line(ev)
		if err != nil || !ok {
			continue
		}
		_, err = w.Write(line)
		switch {
		case err != nil && !failing:
			// A full disk loses these flows, not the agent's others;
			// told once, not for every flow, until writes work again.
			e.log.Warn("exporting flows fails", "path", e.cfg.HubbleExportFilePath, "error", err)
			failing = true
		case err == nil && failing:
			e.log.Info("exporting flows works again", "path", e.cfg.HubbleExportFilePath)
			failing = false
		}
	}
}

// line is ev's line of the file, if the lists let it out: a
// GetFlowsResponse in JSON with Cilium's field names.
func (e *Exporter) line(ev container.Event) ([]byte, bool, error) {
	var resp *observer.GetFlowsResponse
	switch {
	case ev.Flow != nil:
		if !e.c.filters.Pass(ev.Flow) {
			return nil, false, nil
		}
		resp = &observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: e.c.mask.Apply(ev.Flow)},
			NodeName: e.node, Time: ev.Flow.GetTime()}
	case ev.Lost != nil:
		resp = &observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_LostEvents{LostEvents: ev.Lost},
			NodeName: e.node, Time: ev.Lost.GetLast()}
	default:
		return nil, false, nil
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
	if err != nil {
		return nil, false, err
	}
	return append(b, '\n'), true, nil
}
