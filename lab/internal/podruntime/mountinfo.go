package podruntime

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// mountEntry is one line of /proc/self/mountinfo, the fields the runtime reads.
type mountEntry struct {
	Point    string
	Optional []string // "shared:N", "master:N", ...
	FSType   string
}

// parseMountinfo reads mountinfo lines (proc(5)).
func parseMountinfo(data string) []mountEntry {
	var out []mountEntry
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 6 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mountEntry{
			Point:    unescapeMountPath(fields[4]),
			Optional: fields[6:sep],
			FSType:   fields[sep+1],
		})
	}
	return out
}

// mountOf is the mount that holds path: the last mounted of the longest
// mount point that contains it.
func mountOf(entries []mountEntry, path string) (mountEntry, bool) {
	var best mountEntry
	found := false
	for _, e := range entries {
		if e.Point == path || e.Point == "/" || strings.HasPrefix(path, e.Point+"/") {
			if !found || len(e.Point) >= len(best.Point) {
				best, found = e, true
			}
		}
	}
	return best, found
}

// checkShared fails unless path is on a shared mount of this mount namespace.
func checkShared(path string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	m, ok := mountOf(parseMountinfo(string(data)), real)
	if !ok {
		return fmt.Errorf("%s is on no mount", path)
	}
	for _, o := range m.Optional {
		if strings.HasPrefix(o, "shared:") {
			return nil
		}
	}
	return fmt.Errorf("%s is on mount %s, which is not shared (mount --make-shared it on the node)", path, m.Point)
}
