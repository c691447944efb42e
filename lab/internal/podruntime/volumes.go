package podruntime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volumeSource is a prepared volume: a path in the node's filesystem, or a tmpfs the
// sandbox mounts itself.
type volumeSource struct {
	Path     string
	Tmpfs    bool
	IsFile   bool
	ReadOnly bool // forced for API-projected volumes, as the kubelet does
}

// prepareVolumes makes every volume of the pod ready to be bound into the sandbox.
// It is safe to call again: API-projected volumes are rewritten atomically.
func (p *podState) prepareVolumes(ctx context.Context) (map[string]volumeSource, error) {
	out := map[string]volumeSource{}
	for i := range p.pod.Spec.Volumes {
		v := &p.pod.Spec.Volumes[i]
		src, err := p.prepareVolume(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out[v.Name] = src
	}
	return out, nil
}

func (p *podState) prepareVolume(ctx context.Context, v *corev1.Volume) (volumeSource, error) {
	dir := filepath.Join(p.dir, "volumes", v.Name)
	var files map[string]projectedFile
	var err error
	switch {
	case v.EmptyDir != nil:
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return volumeSource{}, err
		}
		// Kubernetes emptyDirs are world-writable so any container user can use them.
		return volumeSource{Path: dir, Tmpfs: v.EmptyDir.Medium == corev1.StorageMediumMemory}, os.Chmod(dir, 0o777)
	case v.HostPath != nil:
		return prepareHostPath(v.HostPath)
	case v.ConfigMap != nil:
		files, err = p.configMapVolume(ctx, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, isTrue(v.ConfigMap.Optional))
	case v.Secret != nil:
		files, err = p.secretVolume(ctx, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, isTrue(v.Secret.Optional))
	case v.DownwardAPI != nil:
		files, err = downwardAPIFiles(p.apiPod(), v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, p.facts())
	case v.Projected != nil:
		files, err = p.projectedVolume(ctx, v.Projected)
	default:
		return volumeSource{}, errors.New("volume type not supported by the lab runtime")
	}
	if err != nil {
		return volumeSource{}, err
	}
	if err := writeAtomic(dir, files); err != nil {
		return volumeSource{}, err
	}
	if sc := p.pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		if err := setVolumeOwnership(dir, *sc.FSGroup); err != nil {
			return volumeSource{}, err
		}
	}
	return volumeSource{Path: dir, ReadOnly: true}, nil
}

// setVolumeOwnership gives an API-projected volume to the pod's fsGroup, as
// the kubelet does: its files and directories belong to the group, which
// may read them (directories also enter them), so a container that runs as
// another user than root still reads a Secret of mode 0400.
func setVolumeOwnership(dir string, gid int64) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(gid)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mask := fs.FileMode(0o440)
		if d.IsDir() {
			mask = 0o550 | fs.ModeSetgid
		}
		return os.Chmod(path, fi.Mode()|mask)
	})
}

func prepareHostPath(hp *corev1.HostPathVolumeSource) (volumeSource, error) {
	p := filepath.Clean(hp.Path)
	typ := corev1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	fi, statErr := os.Stat(p)
	switch typ {
	case corev1.HostPathDirectoryOrCreate:
		if os.IsNotExist(statErr) {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return volumeSource{}, err
			}
			return volumeSource{Path: p}, nil
		}
	case corev1.HostPathFileOrCreate:
		if os.IsNotExist(statErr) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return volumeSource{}, err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return volumeSource{}, err
			}
			return volumeSource{Path: p, IsFile: true}, f.Close()
		}
	}
	if statErr != nil {
		if typ == corev1.HostPathUnset && os.IsNotExist(statErr) {
			// An untyped hostPath that does not exist becomes an empty directory, as with Docker.
			return volumeSource{Path: p}, os.MkdirAll(p, 0o755)
		}
		return volumeSource{}, statErr
	}
	mode := fi.Mode()
	want := map[corev1.HostPathType]func() bool{
		corev1.HostPathDirectory:         fi.IsDir,
		corev1.HostPathDirectoryOrCreate: fi.IsDir,
		corev1.HostPathFile:              mode.IsRegular,
		corev1.HostPathFileOrCreate:      mode.IsRegular,
		corev1.HostPathSocket:            func() bool { return mode&os.ModeSocket != 0 },
		corev1.HostPathCharDev:           func() bool { return mode&os.ModeCharDevice != 0 },
		corev1.HostPathBlockDev:          func() bool { return mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0 },
	}
	if check, ok := want[typ]; ok && !check() {
		return volumeSource{}, fmt.Errorf("hostPath %s is not of type %s", p, typ)
	}
	return volumeSource{Path: p, IsFile: !fi.IsDir()}, nil
}

func (p *podState) configMapVolume(ctx context.Context, name string, items []corev1.KeyToPath, mode *int32, optional bool) (map[string]projectedFile, error) {
	cm, err := p.rt.src.configMap(ctx, p.pod.Namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return map[string]projectedFile{}, nil
		}
		return nil, fmt.Errorf("configmap %s: %w", name, err)
	}
	return keyFiles("configmap", name, configMapData(cm), items, mode, optional)
}

func (p *podState) secretVolume(ctx context.Context, name string, items []corev1.KeyToPath, mode *int32, optional bool) (map[string]projectedFile, error) {
	s, err := p.rt.src.secret(ctx, p.pod.Namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return map[string]projectedFile{}, nil
		}
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return keyFiles("secret", name, s.Data, items, mode, optional)
}

func (p *podState) projectedVolume(ctx context.Context, pv *corev1.ProjectedVolumeSource) (map[string]projectedFile, error) {
	out := map[string]projectedFile{}
	for _, s := range pv.Sources {
		var files map[string]projectedFile
		var err error
		switch {
		case s.ConfigMap != nil:
			files, err = p.configMapVolume(ctx, s.ConfigMap.Name, s.ConfigMap.Items, pv.DefaultMode, isTrue(s.ConfigMap.Optional))
		case s.Secret != nil:
			files, err = p.secretVolume(ctx, s.Secret.Name, s.Secret.Items, pv.DefaultMode, isTrue(s.Secret.Optional))
		case s.DownwardAPI != nil:
			files, err = downwardAPIFiles(p.apiPod(), s.DownwardAPI.Items, pv.DefaultMode, p.facts())
		case s.ServiceAccountToken != nil:
			files, err = p.tokenFile(ctx, s.ServiceAccountToken, pv.DefaultMode)
		default:
			err = errors.New("projected source not supported by the lab runtime")
		}
		if err != nil {
			return nil, err
		}
		maps.Copy(out, files)
	}
	return out, nil
}

// cachedToken is a token the pod already holds; it is renewed after 80% of its
// lifetime, as the kubelet does.
type cachedToken struct {
	token          string
	issued, expiry time.Time
}

func (t cachedToken) fresh(now time.Time) bool {
	return t.token != "" && now.Before(t.issued.Add(t.expiry.Sub(t.issued)*8/10))
}

// tokenFile asks the API server for a service-account token bound to this pod, as the
// kubelet does for projected serviceAccountToken sources.
func (p *podState) tokenFile(ctx context.Context, src *corev1.ServiceAccountTokenProjection, mode *int32) (map[string]projectedFile, error) {
	key := src.Path + "\x00" + src.Audience
	p.mu.Lock()
	cached := p.tokens[key]
	p.mu.Unlock()
	if !cached.fresh(time.Now()) {
		tok, err := p.requestToken(ctx, src)
		if err != nil {
			return nil, err
		}
		cached = tok
		p.mu.Lock()
		if p.tokens == nil {
			p.tokens = map[string]cachedToken{}
		}
		p.tokens[key] = tok
		p.mu.Unlock()
	}
	return map[string]projectedFile{src.Path: {Data: []byte(cached.token), Mode: fileMode(nil, mode)}}, nil
}

func (p *podState) requestToken(ctx context.Context, src *corev1.ServiceAccountTokenProjection) (cachedToken, error) {
	sa := p.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: src.ExpirationSeconds,
			BoundObjectRef: &authv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: p.pod.Name, UID: p.pod.UID,
			},
		},
	}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	now := time.Now()
	tr, err := p.rt.cfg.Client.CoreV1().ServiceAccounts(p.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return cachedToken{}, fmt.Errorf("token for serviceaccount %s: %w", sa, err)
	}
	return cachedToken{token: tr.Status.Token, issued: now, expiry: tr.Status.ExpirationTimestamp.Time}, nil
}

// mountSpec is one mount the sandbox makes inside the pod root, in order.
type mountSpec struct {
	Source   string `json:"source,omitempty"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	Tmpfs    bool   `json:"tmpfs,omitempty"`
	IsFile   bool   `json:"isFile,omitempty"`
	// Propagation is the volumeMount's mountPropagation; empty is None.
	Propagation string `json:"propagation,omitempty"`
}

// volumeMounts turns the containers' volumeMounts into sandbox mounts. Containers
// share the sandbox's mount namespace, so a path mounted by one is seen by all; the
// first mount of a path wins. Parents are mounted before their children.
func volumeMounts(pod *corev1.Pod, vols map[string]volumeSource) ([]mountSpec, error) {
	byTarget := map[string]mountSpec{}
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, vm := range c.VolumeMounts {
			src, ok := vols[vm.Name]
			if !ok {
				return nil, fmt.Errorf("container %s mounts unknown volume %s", c.Name, vm.Name)
			}
			target := path.Clean("/" + vm.MountPath)
			if _, dup := byTarget[target]; dup {
				continue
			}
			m := mountSpec{Source: src.Path, Target: target, ReadOnly: vm.ReadOnly || src.ReadOnly, Tmpfs: src.Tmpfs, IsFile: src.IsFile}
			if vm.MountPropagation != nil && *vm.MountPropagation != corev1.MountPropagationNone {
				if src.Tmpfs || src.IsFile {
					return nil, fmt.Errorf("container %s: mountPropagation %s of volume %s: only a directory of the node propagates mounts",
						c.Name, *vm.MountPropagation, vm.Name)
				}
				if *vm.MountPropagation == corev1.MountPropagationBidirectional && !privileged(&c) {
					// As the API server validates: mounts a container makes would
					// reach the node.
					return nil, fmt.Errorf("container %s: mountPropagation Bidirectional of volume %s needs a privileged container",
						c.Name, vm.Name)
				}
				m.Propagation = string(*vm.MountPropagation)
			}
			if sub := vm.SubPath; sub != "" {
				if err := validRelPath(sub); err != nil {
					return nil, fmt.Errorf("container %s: subPath: %w", c.Name, err)
				}
				if src.Tmpfs {
					return nil, fmt.Errorf("container %s: subPath of a memory emptyDir is not supported", c.Name)
				}
				m.Source = filepath.Join(src.Path, sub)
				fi, err := os.Stat(m.Source)
				switch {
				case os.IsNotExist(err):
					if err := os.MkdirAll(m.Source, 0o777); err != nil {
						return nil, err
					}
				case err != nil:
					return nil, err
				default:
					m.IsFile = !fi.IsDir()
				}
			}
			byTarget[target] = m
		}
	}
	targets := slices.Sorted(maps.Keys(byTarget))
	slices.SortStableFunc(targets, func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
	out := make([]mountSpec, 0, len(targets))
	for _, t := range targets {
		out = append(out, byTarget[t])
	}
	return out, nil
}

func privileged(c *corev1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}
