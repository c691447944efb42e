package podruntime

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// projectedFile is one file of a configMap, secret, downwardAPI or projected volume.
type projectedFile struct {
	Data []byte
	Mode os.FileMode
}

const defaultFileMode = 0o644

func fileMode(itemMode, defaultMode *int32) os.FileMode {
	switch {
	case itemMode != nil:
		return os.FileMode(*itemMode) & os.ModePerm
	case defaultMode != nil:
		return os.FileMode(*defaultMode) & os.ModePerm
	}
	return defaultFileMode
}

// keyFiles projects a key/value map: every key when items is empty, else the listed
// keys at their paths. A listed key that is missing is an error unless optional.
func keyFiles(kind, name string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool) (map[string]projectedFile, error) {
	out := map[string]projectedFile{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = projectedFile{Data: v, Mode: fileMode(nil, defaultMode)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s %s has no key %q", kind, name, it.Key)
		}
		out[it.Path] = projectedFile{Data: v, Mode: fileMode(it.Mode, defaultMode)}
	}
	return out, nil
}

func configMapData(cm *corev1.ConfigMap) map[string][]byte {
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return data
}

// downwardAPIFiles projects downwardAPI items: pod fields and container resources.
func downwardAPIFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode *int32, facts podFacts) (map[string]projectedFile, error) {
	out := map[string]projectedFile{}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podFieldValue(pod, it.FieldRef.FieldPath, facts)
		case it.ResourceFieldRef != nil:
			if len(pod.Spec.Containers) == 0 {
				return nil, fmt.Errorf("%s: pod has no containers", it.Path)
			}
			v, err = resourceFieldValue(pod, &pod.Spec.Containers[0], it.ResourceFieldRef, facts)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", it.Path, err)
		}
		out[it.Path] = projectedFile{Data: []byte(v), Mode: fileMode(it.Mode, defaultMode)}
	}
	return out, nil
}

// validRelPath rejects item paths that would escape the volume directory.
func validRelPath(p string) error {
	if p == "" || path.IsAbs(p) || strings.HasPrefix(p, "..") {
		return fmt.Errorf("invalid path %q", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("invalid path %q", p)
		}
	}
	return nil
}

// writeAtomic makes dir hold exactly files, the way the kubelet's atomic writer lays
// them out: the payload lives in a timestamped directory, "..data" points at it, and
// each top-level entry is a symlink through "..data". Readers therefore see either the
// old or the new payload, never a mix, and programs that watch "..data" see updates.
func writeAtomic(dir string, files map[string]projectedFile) error {
	for p := range files {
		if err := validRelPath(p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tsDir, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, f.Mode); err != nil {
			return err
		}
		// WriteFile's mode is filtered by the umask; the volume's mode is not.
		if err := os.Chmod(full, f.Mode); err != nil {
			return err
		}
	}

	dataLink := filepath.Join(dir, "..data")
	oldTarget, _ := os.Readlink(dataLink)
	tmpLink := filepath.Join(dir, "..data_tmp")
	os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		return err
	}

	top := map[string]bool{}
	for p := range files {
		first, _, _ := strings.Cut(p, "/")
		top[first] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if oldTarget != "" && oldTarget != filepath.Base(tsDir) {
		return os.RemoveAll(filepath.Join(dir, oldTarget))
	}
	return nil
}
