package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A tree is one revision's source: where it is, the directory its
// binaries are built into (a benchmark's -bin) and its built benchmark
// programs.
type tree struct {
	name  string // "base" or "head"
	dir   string
	rev   string
	bin   string
	progs map[string]string // "./bench/cni" -> its executable
}

// workspace is the base tree's worktree and both trees' builds, in a
// directory named after the base commit: the same paths on every run, so
// that Go's build cache serves a second run of the same base (a package's
// directory is part of what the cache keys).
type workspace struct {
	repo       string // the current tree's top directory
	dir        string
	base, head *tree
	headDirty  bool // the current tree has uncommitted changes
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// newWorkspace resolves base and checks it out in a worktree.
func newWorkspace(ctx context.Context, log *slog.Logger, base string) (*workspace, error) {
	repo, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("run it inside the repository: %w", err)
	}
	baseRev, err := git(ctx, repo, "rev-parse", "--verify", "--end-of-options", base+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("-base %s: %w", base, err)
	}
	headRev, err := git(ctx, repo, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	status, err := git(ctx, repo, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(os.TempDir(), "bench-compare-"+baseRev[:12])
	// Mkdir, not MkdirAll: a second run at once, or one killed before it
	// could clean up, would share the worktree.
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%s exists: another run of this base is under way, or one was killed; if none runs: "+
				"git worktree remove --force %s; rm -rf %s", dir, filepath.Join(dir, "base"), dir)
		}
		return nil, err
	}
	// Each tree's binaries go to its bin, as make's: the lab takes the
	// install manifests from beside its binaries (bin/../install). The
	// current tree's are rebuilt only if stale, as make bench-* does.
	baseDir := filepath.Join(dir, "base")
	w := &workspace{repo: repo, dir: dir, headDirty: status != "",
		base: &tree{name: "base", dir: baseDir, rev: baseRev, bin: filepath.Join(baseDir, "bin")},
		head: &tree{name: "head", dir: repo, rev: headRev, bin: filepath.Join(repo, "bin")}}
	log.Info("checking out the base", "rev", baseRev[:12], "dir", w.base.dir)
	if _, err := git(ctx, repo, "worktree", "add", "--detach", w.base.dir, baseRev); err != nil {
		return nil, errors.Join(err, w.remove(log))
	}
	return w, nil
}

// remove takes the worktree and the builds away. It runs after an
// interrupt too, so it uses a context of its own.
func (w *workspace) remove(log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if _, err := os.Stat(w.base.dir); err == nil {
		if _, err := git(ctx, w.repo, "worktree", "remove", "--force", w.base.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := git(ctx, w.repo, "worktree", "prune"); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, os.RemoveAll(w.dir))
	log.Info("removed the worktree and the builds", "dir", w.dir)
	return errors.Join(errs...)
}

func (w *workspace) trees() []*tree { return []*tree{w.base, w.head} }

// build makes, in each tree, the Makefile targets the parts need and
// their benchmark programs.
func (w *workspace) build(ctx context.Context, log *slog.Logger, parts []*part, flags map[string][]string) error {
	var targets, programs []string
	for _, p := range parts {
		for _, t := range p.targets(flags[p.name]) {
			if !slices.Contains(targets, t) {
				targets = append(targets, t)
			}
		}
		programs = append(programs, p.program)
	}
	for _, t := range w.trees() {
		if len(targets) > 0 {
			start := time.Now()
			log.Info("building", "tree", t.name, "targets", strings.Join(targets, " "))
			if slices.Contains(targets, "build-lab") {
				log.Info("building: a cold build of the lab's Kubernetes takes half an hour")
			}
			if err := command(ctx, t.dir, nil, "make", slices.Concat(targets, []string{"BIN=" + t.bin})...); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			log.Info("built", "tree", t.name, "took", time.Since(start).Round(time.Second))
		}
		// The tree's goinstall.sh is go install with a progress line.
		progs := filepath.Join(w.dir, t.name+"-bench")
		log.Info("building the benchmarks", "tree", t.name, "programs", strings.Join(programs, " "))
		install := append([]string{"bench"}, programs...)
		if err := command(ctx, t.dir, []string{"GOBIN=" + progs}, "hack/goinstall.sh", install...); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		t.progs = map[string]string{}
		for _, prog := range programs {
			t.progs[prog] = filepath.Join(progs, filepath.Base(prog))
		}
	}
	return nil
}

// command runs a build step with env added to the environment, its
// output going to stderr as progress.
func command(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// waitDelay is how long a benchmark has, after the interrupt, to remove
// what it made (a lab's down) before it is killed.
const waitDelay = 3 * time.Minute

// runProgram runs a benchmark program in its tree and returns what it
// printed; its log goes to stderr. An interrupt (ctx) reaches it as
// SIGINT, on which the benchmarks clean up, and not as the SIGKILL that
// exec would send.
func runProgram(ctx context.Context, t *tree, exe string, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = t.dir
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = waitDelay
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s (%s): %w", filepath.Base(exe), t.name, err)
	}
	return out.String(), nil
}
