package exporter

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Rotating is a file that, before a write would take it past maxSize,
// is renamed to a backup (name-<UTC time>.ext, as lumberjack names them,
// so that the names sort by age) and started anew; only the newest
// maxBackups backups are kept, gzipped when compress is set. Lines are
// never split across files. It is not safe for concurrent use.
type Rotating struct {
	path       string
	maxSize    int64
	maxBackups int
	compress   bool
	f          *os.File
	size       int64
	closed     bool
	now        func() time.Time
}

// backupTime is the backups' time format: no colons, which some tools
// take for a host.
const backupTime = "2006-01-02T15-04-05.000"

// OpenRotating opens path for appending, creating it and its directory
// (0700: flows say who talks to whom) if needed.
func OpenRotating(path string, maxSize int64, maxBackups int, compress bool) (*Rotating, error) {
	r := &Rotating{path: path, maxSize: maxSize, maxBackups: maxBackups, compress: compress, now: time.Now}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Rotating) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, st.Size()
	return nil
}

// Write appends p, rotating first when p would not fit; a p larger than
// maxSize goes alone into a file of its own.
func (r *Rotating) Write(p []byte) (int, error) {
	if r.closed {
		return 0, os.ErrClosed
	}
	if r.f == nil {
		// A rotation that failed left no file: try again at each write.
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	if r.size > 0 && r.size+int64(len(p)) > r.maxSize {
		if err := r.rotate(); err != nil {
			return 0, fmt.Errorf("rotate %s: %w", r.path, err)
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// Close closes the current file.
func (r *Rotating) Close() error {
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

func (r *Rotating) rotate() error {
	if err := r.f.Close(); err != nil {
		return err
	}
	r.f = nil
	ext := filepath.Ext(r.path)
	backup := strings.TrimSuffix(r.path, ext) + "-" + r.now().UTC().Format(backupTime) + ext
	if err := os.Rename(r.path, backup); err != nil {
		return err
	}
	if r.compress {
		if err := gzipFile(backup); err != nil {
			return err
		}
	}
	if err := r.prune(); err != nil {
		return err
	}
	return r.open()
}

// backups are the rotated files, oldest first.
func (r *Rotating) backups() ([]string, error) {
	ext := filepath.Ext(r.path)
	prefix := filepath.Base(strings.TrimSuffix(r.path, ext)) + "-"
	entries, err := os.ReadDir(filepath.Dir(r.path))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".gz")
		if !e.Type().IsRegular() || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ext) {
			continue
		}
		stamp := strings.TrimSuffix(strings.TrimPrefix(name, prefix), ext)
		if _, err := time.Parse(backupTime, stamp); err != nil {
			continue
		}
		out = append(out, filepath.Join(filepath.Dir(r.path), e.Name()))
	}
	slices.Sort(out)
	return out, nil
}

func (r *Rotating) prune() error {
	old, err := r.backups()
	if err != nil {
		return err
	}
	for len(old) > r.maxBackups {
		if err := os.Remove(old[0]); err != nil {
			return err
		}
		old = old[1:]
	}
	return nil
}

// gzipFile replaces path by path.gz.
func gzipFile(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(path+".gz", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		out.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Remove(path)
}
