package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium-go/cilium/lab/internal/plan"
)

// progress tells the user what `up` is doing and waiting for.
type progress struct {
	out       io.Writer
	start     time.Time
	stepName  string
	stepStart time.Time
}

func (p *progress) step(name string) {
	p.finish()
	p.stepName, p.stepStart = name, time.Now()
	fmt.Fprintf(p.out, "  • %s ...", name)
}

func (p *progress) finish() {
	if p.stepName != "" {
		fmt.Fprintf(p.out, " ok (%s)\n", time.Since(p.stepStart).Round(10*time.Millisecond))
		p.stepName = ""
	}
}

func (p *progress) done() { p.finish() }

func (p *progress) fail(err error) {
	if p.stepName != "" {
		fmt.Fprintf(p.out, " failed after %s\n", time.Since(p.stepStart).Round(10*time.Millisecond))
		p.stepName = ""
	}
	fmt.Fprintf(p.out, "error: %v\n", err)
}

// waitFor polls fn until it succeeds, ctx ends or fn returns a backoffStop. While it
// waits it prints why, whenever the reason changes.
func (p *progress) waitFor(ctx context.Context, fn func() error) error {
	last := ""
	for {
		err := fn()
		if err == nil {
			return nil
		}
		var stop backoffStop
		if errors.As(err, &stop) {
			return stop.error
		}
		if msg := err.Error(); msg != last && time.Since(p.stepStart) > 3*time.Second {
			fmt.Fprintf(p.out, "\n      waiting: %s", firstLine(msg))
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: gave up after %s: %w", p.stepName, time.Since(p.stepStart).Round(time.Second), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// firstLine shortens an error for a progress line. A health endpoint's answer lists
// every check; only the failing ones ("[-]...") say what is being waited for.
func firstLine(s string) string {
	if strings.Contains(s, "[-]") {
		var failing []string
		for _, l := range strings.Split(strings.ReplaceAll(s, `\n`, "\n"), "\n") {
			if i := strings.Index(l, "[-]"); i >= 0 {
				name, _, _ := strings.Cut(l[i+3:], " ")
				failing = append(failing, name)
			}
		}
		return "API server checks not passing yet: " + strings.Join(failing, ", ")
	}
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// showLogs prints the end of every log of a failed lab before it is removed.
func showLogs(out io.Writer, p plan.Plan) {
	var logs []string
	for _, dir := range []string{filepath.Join(p.StateDir, "logs"), filepath.Join(p.ControlPlaneDir, "logs")} {
		m, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		logs = append(logs, m...)
	}
	for _, n := range p.Nodes {
		m, _ := filepath.Glob(filepath.Join(n.Dir, "*.log"))
		logs = append(logs, m...)
	}
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(out, "--- last lines of %s\n%s\n", f, strings.Join(lines, "\n"))
	}
}
