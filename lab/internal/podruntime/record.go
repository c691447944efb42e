package podruntime

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podRecord is what a later node agent needs to clean up after this one: the
// processes it started (with their start times, so a reused pid is never killed)
// and the network attachment.
type podRecord struct {
	UID       string    `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	SandboxID string    `json:"sandboxID,omitempty"`
	Netns     string    `json:"netns,omitempty"`
	Procs     []procRef `json:"procs,omitempty"`
}

type procRef struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

const recordFile = "state.json"

// saveRecord writes the pod's record; procs only ever grows, so exited processes
// stay listed and are skipped by their start time.
func (p *podState) saveRecord() error {
	path := filepath.Join(p.dir, recordFile)
	var rec podRecord
	if data, err := os.ReadFile(path); err == nil {
		json.Unmarshal(data, &rec)
	}
	p.mu.Lock()
	rec.UID, rec.Namespace, rec.Name = string(p.pod.UID), p.pod.Namespace, p.pod.Name
	rec.Netns = p.netnsPath
	var pids []int
	if p.sandbox != nil {
		rec.SandboxID = p.sandbox.id
		pids = append(pids, p.sandbox.pid)
	}
	for _, c := range append(append([]*container(nil), p.initCtrs...), p.containers...) {
		if c.proc != nil {
			pids = append(pids, c.proc.Pid)
		}
	}
	p.mu.Unlock()
	for _, pid := range pids {
		known := false
		for _, pr := range rec.Procs {
			known = known || pr.PID == pid
		}
		if start, ok := procStart(pid); ok && !known {
			rec.Procs = append(rec.Procs, procRef{PID: pid, Start: start})
		}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// procStart returns a process's start time in clock ticks since boot (field 22 of
// /proc/<pid>/stat).
func procStart(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may contain spaces; fields are counted after its ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// Cleanup removes every pod a node agent left in podsDir: it kills the recorded
// processes (their process groups, which hold the containers' children), detaches
// their networks, unmounts and removes the directories. New calls it; `cilium-lab
// down` can call it for a node whose agent is gone. Run it in the node's mount
// namespace so the pinned netns files are visible; network may be nil.
func Cleanup(ctx context.Context, podsDir string, network Network, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	entries, err := os.ReadDir(podsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(podsDir, e.Name())
		var rec podRecord
		if data, err := os.ReadFile(filepath.Join(dir, recordFile)); err == nil {
			json.Unmarshal(data, &rec)
		}
		for _, pr := range rec.Procs {
			if start, ok := procStart(pr.PID); ok && start == pr.Start {
				unix.Kill(-pr.PID, unix.SIGKILL)
				unix.Kill(pr.PID, unix.SIGKILL)
			}
		}
		if rec.Netns != "" && network != nil {
			netns := rec.Netns
			if !isNetns(netns) {
				// Pinned no more: CNI DEL still releases the address without it.
				netns = ""
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rec.Name, Namespace: rec.Namespace, UID: types.UID(rec.UID)}}
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			if err := network.Del(dctx, pod, rec.SandboxID, netns); err != nil {
				log.Warn("network del of stale pod", "dir", dir, "error", err)
			}
			cancel()
		}
		if rec.Netns != "" {
			if err := unpinNetns(rec.Netns, dir); err != nil {
				log.Warn("unpin stale pod's netns", "dir", dir, "error", err)
			}
		}
		if err := removePodDir(dir); err != nil {
			log.Warn("remove stale pod dir", "dir", dir, "error", err)
			continue
		}
		log.Info("removed stale pod", "pod", rec.Namespace+"/"+rec.Name, "uid", rec.UID)
	}
}

// isNetns reports whether path is a pinned network namespace (an nsfs mount).
func isNetns(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}
