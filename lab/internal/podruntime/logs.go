package podruntime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// Container logs use the kubelet's CRI format, one record per line:
// "<RFC3339Nano time> <stream> <F|P> <content>", P marking a line split because it
// exceeded maxLogLine.
const maxLogLine = 16 * 1024

// logFile appends a container attempt's stdout and stderr to its log file.
type logFile struct {
	mu      sync.Mutex
	f       *os.File
	copiers sync.WaitGroup
}

func openLog(path string) (*logFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	return &logFile{f: f}, nil
}

// pipes connects cmd's stdout and stderr to the log and returns the write ends,
// which the caller closes once the command has started.
func (l *logFile) pipes(cmd *exec.Cmd) (stdout, stderr *os.File, err error) {
	or, ow, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	er, ew, err := os.Pipe()
	if err != nil {
		or.Close()
		ow.Close()
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = ow, ew
	l.copiers.Add(2)
	go l.copy(or, "stdout")
	go l.copy(er, "stderr")
	return ow, ew, nil
}

func (l *logFile) copy(r *os.File, stream string) {
	defer l.copiers.Done()
	defer r.Close()
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 || (err == nil && !isPrefix) {
			l.write(stream, line, isPrefix)
		}
		if err != nil {
			return
		}
	}
}

func (l *logFile) write(stream string, line []byte, partial bool) {
	tag := " F "
	if partial {
		tag = " P "
	}
	var b bytes.Buffer
	b.WriteString(time.Now().UTC().Format(time.RFC3339Nano))
	b.WriteString(" " + stream + tag)
	b.Write(line)
	b.WriteByte('\n')
	l.mu.Lock()
	l.f.Write(b.Bytes())
	l.mu.Unlock()
}

// Close waits until both streams are drained (every process holding them exited).
func (l *logFile) Close() error {
	done := make(chan struct{})
	go func() { l.copiers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		// A stray process still holds the pipe; stop waiting, the copier ends with it.
	}
	return l.f.Close()
}

// logRecord is one parsed line of a log file.
type logRecord struct {
	Time    time.Time
	Stream  string
	Partial bool
	Content []byte
}

func parseLogLine(line []byte) (logRecord, bool) {
	ts, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return logRecord{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return logRecord{}, false
	}
	stream, rest, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return logRecord{}, false
	}
	tag, content, _ := bytes.Cut(rest, []byte(" "))
	return logRecord{Time: t, Stream: string(stream), Partial: string(tag) == "P", Content: content}, true
}

// renderLog writes the records of r selected by opts to w. When follow is set it
// keeps reading new records until done is closed and the file is drained, or ctx ends.
func renderLog(ctx context.Context, path string, opts api.ContainerLogOpts, done <-chan struct{}, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	since := opts.SinceTime
	if opts.SinceSeconds > 0 {
		since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	emit := (&logEmitter{w: w, timestamps: opts.Timestamps, limit: opts.LimitBytes, budget: opts.LimitBytes}).emit
	br := bufio.NewReader(f)
	var pending []byte
	var tail []logRecord
	first, writerGone := true, false
	for {
		chunk, err := br.ReadBytes('\n')
		pending = append(pending, chunk...)
		if err == nil {
			rec, ok := parseLogLine(bytes.TrimSuffix(pending, []byte("\n")))
			pending = nil
			switch {
			case !ok || (!since.IsZero() && rec.Time.Before(since)):
			case first && opts.Tail > 0:
				// Tail counts lines: a split line's parts are one.
				if n := len(tail); n > 0 && tail[n-1].Partial {
					tail[n-1].Content = append(slices.Clip(tail[n-1].Content), rec.Content...)
					tail[n-1].Partial = rec.Partial
					continue
				}
				tail = append(tail, rec)
				if len(tail) > opts.Tail {
					tail = tail[1:]
				}
			default:
				if err := emit(rec); err != nil {
					return ignoreEOF(err)
				}
			}
			continue
		}
		if err != io.EOF {
			return err
		}
		// At the end of what is written so far; a partial line stays pending.
		if first {
			first = false
			for _, rec := range tail {
				if err := emit(rec); err != nil {
					return ignoreEOF(err)
				}
			}
			tail = nil
		}
		if !opts.Follow || writerGone {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			// The writer is gone: one more pass drains what it wrote last.
			writerGone = true
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logEmitter writes records as kubectl shows them, within a byte budget.
type logEmitter struct {
	w             io.Writer
	timestamps    bool
	limit, budget int
}

// emit writes one record; io.EOF means the byte limit is reached.
func (e *logEmitter) emit(rec logRecord) error {
	var b bytes.Buffer
	if e.timestamps {
		b.WriteString(rec.Time.Format(time.RFC3339Nano) + " ")
	}
	b.Write(rec.Content)
	if !rec.Partial {
		b.WriteByte('\n')
	}
	out := b.Bytes()
	if e.limit > 0 {
		if e.budget <= 0 {
			return io.EOF
		}
		if len(out) > e.budget {
			out = out[:e.budget]
		}
		e.budget -= len(out)
	}
	_, err := e.w.Write(out)
	return err
}

func ignoreEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
