// Package record keeps the journal of everything a lab creates on the machine, so that
// `cilium-lab down` can remove it all even after a crash, and twice in a row.
//
// The journal is a file of JSON lines. An entry is appended (and synced) before the
// resource it names is created, so a crash can leave an entry without its resource but
// never a resource without its entry; teardown treats a missing resource as removed.
package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
)

// Kind says how a resource is removed.
type Kind string

const (
	// Dir is a directory the lab made; removed with its content.
	Dir Kind = "dir"
	// EmptyDir is a mount point the lab had to make on the host; removed only if empty.
	EmptyDir Kind = "emptydir"
	// Mount is a mount in the host's mount namespace; detached.
	Mount Kind = "mount"
	// NSFile is a namespace bind-mounted to a file; detached and the file removed.
	NSFile Kind = "nsfile"
	// Cgroup is a cgroup v2 directory; every process in it is killed, then it is removed.
	Cgroup Kind = "cgroup"
	// Process is a process; killed only if its start time still matches.
	Process Kind = "process"
)

// Entry is one created resource.
type Entry struct {
	Kind Kind   `json:"kind"`
	Path string `json:"path,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// Start is the process start time in clock ticks since boot (field 22 of /proc/PID/stat),
	// which tells a recorded process from a later one that reuses its PID.
	Start uint64 `json:"start,omitempty"`
}

func (e Entry) String() string {
	if e.Kind == Process {
		return fmt.Sprintf("process %d", e.PID)
	}
	return fmt.Sprintf("%s %s", e.Kind, e.Path)
}

// Record appends entries to a journal file.
type Record struct {
	mu   sync.Mutex
	path string
}

// Open returns the record kept in path; the file is created on the first Add.
func Open(path string) *Record { return &Record{path: path} }

// Path is the journal file.
func (r *Record) Path() string { return r.path }

// Add appends e and syncs it to disk before returning.
func (r *Record) Add(e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("record %s: %w", e, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("record %s: %w", e, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record %s: %w", e, err)
	}
	return f.Close()
}

// Read returns the entries of a journal in the order they were added. A torn last line
// (a crash while appending) is ignored; a damaged line elsewhere is an error.
func Read(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && isLastLine(b, sc.Bytes()) {
				break
			}
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

func isLastLine(all, line []byte) bool {
	return bytes.HasSuffix(all, line)
}

// Undoer removes one kind of resource. It returns nil when the resource is already gone.
type Undoer interface {
	Undo(Entry) error
}

// Teardown undoes entries newest first, each resource once, and carries on past errors,
// which it returns together.
func Teardown(entries []Entry, u Undoer) error {
	seen := map[Entry]bool{}
	var errs []error
	for _, e := range slices.Backward(entries) {
		if seen[e] {
			continue
		}
		seen[e] = true
		if err := u.Undo(e); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", e, err))
		}
	}
	return errors.Join(errs...)
}
