// Package podruntime is the lab's container runtime: a virtual-kubelet provider that
// runs each pod as a sandbox process (pod-init) holding fresh network, mount, UTS and
// IPC namespaces, and each container as a process entered into them with nsenter.
// It reports container states, restarts, probes and pod phase the way the kubelet
// does, serves logs, exec and port-forward, and projects volumes from the API.
package podruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium-go/cilium/lab/internal/images"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Network attaches pod network namespaces; the node agent implements it with libcni.
type Network interface {
	// Add attaches the pod's network namespace (netnsPath) and returns the pod IPs.
	Add(ctx context.Context, pod *corev1.Pod, containerID, netnsPath string) ([]netip.Addr, error)
	Del(ctx context.Context, pod *corev1.Pod, containerID, netnsPath string) error
}

// Config is what the runtime needs from the node agent.
type Config struct {
	NodeName string
	NodeIP   netip.Addr
	// PodsDir holds one directory per pod UID: state, logs, volumes, /etc files.
	PodsDir string
	// SandboxBinary runs SandboxMain when its first argument is "pod-init".
	SandboxBinary string
	Images        *images.Catalog
	Network       Network
	ClusterDNS    netip.Addr
	ClusterDomain string
	Client        kubernetes.Interface
	Logger        *slog.Logger

	// NsenterPath defaults to /usr/bin/nsenter.
	NsenterPath string
	// MaxGracePeriod caps terminationGracePeriodSeconds (default 10s): the lab
	// favours fast deletes over patient shutdowns.
	MaxGracePeriod time.Duration
	// BackoffInitial and BackoffMax bound the crash-loop back-off (default 1s, 30s).
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// VolumeRefresh is how often configMap, secret, downward API and token volumes
	// are rewritten from the API (default 1m).
	VolumeRefresh time.Duration
	// StorageCheck is how often the local storage of pods with an
	// ephemeral-storage limit or an emptyDir sizeLimit is measured (default 10s,
	// the kubelet's housekeeping period).
	StorageCheck time.Duration
	// NetnsDir, if set, is where pods' network namespaces are pinned, each as
	// cni-<sandbox id> (as containerd pins them under /var/run/netns), and the
	// path CNI and the agent get; else each pod's is <pod dir>/netns.
	NetnsDir string
}

func (c *Config) setDefaults() error {
	if c.PodsDir == "" || c.SandboxBinary == "" || c.Images == nil || c.Client == nil {
		return errors.New("podruntime: PodsDir, SandboxBinary, Images and Client are required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NsenterPath == "" {
		c.NsenterPath = "/usr/bin/nsenter"
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	if c.MaxGracePeriod == 0 {
		c.MaxGracePeriod = 10 * time.Second
	}
	if c.BackoffInitial == 0 {
		c.BackoffInitial = time.Second
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 30 * time.Second
	}
	if c.VolumeRefresh == 0 {
		c.VolumeRefresh = time.Minute
	}
	if c.StorageCheck == 0 {
		c.StorageCheck = 10 * time.Second
	}
	return nil
}

// Runtime runs the pods of one node. It implements nodeutil.Provider and
// node.PodNotifier.
type Runtime struct {
	cfg Config
	log *slog.Logger
	src envSource

	mu   sync.Mutex
	pods map[string]*podState // by namespace/name

	// apiPods, a corev1listers.PodLister, has the node's pods as the API server has
	// them, once WatchAPIPods was called.
	apiPods atomic.Value

	notifier *notifier
}

var (
	_ nodeutil.Provider = (*Runtime)(nil)
	_ node.PodNotifier  = (*Runtime)(nil)
)

// New returns a runtime after removing what a previous run left in PodsDir:
// processes, network attachments, mounts and directories. The pod controller
// recreates the pods.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.NsenterPath); err != nil {
		return nil, fmt.Errorf("nsenter: %w", err)
	}
	if err := os.MkdirAll(cfg.PodsDir, 0o750); err != nil {
		return nil, err
	}
	rt := &Runtime{
		cfg:      cfg,
		log:      cfg.Logger,
		src:      envSource{client: cfg.Client},
		pods:     map[string]*podState{},
		notifier: newNotifier(),
	}
	Cleanup(context.Background(), cfg.PodsDir, cfg.Network, cfg.Logger)
	return rt, nil
}

func podKey(namespace, name string) string { return namespace + "/" + name }

func (rt *Runtime) lookup(namespace, name string) *podState {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.pods[podKey(namespace, name)]
}

// CreatePod starts the pod's sandbox and containers in the background; progress is
// reported through NotifyPods.
func (rt *Runtime) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	rt.mu.Lock()
	if old, ok := rt.pods[key]; ok {
		if old.pod.UID == pod.UID {
			rt.mu.Unlock()
			return nil
		}
		rt.mu.Unlock()
		// A pod of the same name but a new UID (a StatefulSet replica): the old one
		// must be gone first.
		if err := rt.DeletePod(ctx, old.pod); err != nil {
			return err
		}
		rt.mu.Lock()
	}
	p := newPodState(rt, pod.DeepCopy())
	rt.pods[key] = p
	rt.mu.Unlock()

	rt.log.Info("create pod", "pod", key, "uid", pod.UID)
	p.changed()
	go p.run()
	return nil
}

// UpdatePod takes what may change on a running pod: labels and annotations (seen by
// the downward API) and the deletion fields. Image changes are not applied.
func (rt *Runtime) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	p := rt.lookup(pod.Namespace, pod.Name)
	if p == nil || p.pod.UID != pod.UID {
		return errdefs.NotFoundf("pod %s/%s not found", pod.Namespace, pod.Name)
	}
	p.mu.Lock()
	p.meta = pod.ObjectMeta.DeepCopy()
	p.mu.Unlock()
	p.changed()
	return nil
}

// DeletePod stops the pod's containers (SIGTERM, then SIGKILL after the capped grace
// period), detaches its network, stops the sandbox and removes the pod directory.
// The final status, with every container terminated, goes out through NotifyPods.
func (rt *Runtime) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	p := rt.lookup(pod.Namespace, pod.Name)
	if p == nil || (pod.UID != "" && p.pod.UID != pod.UID) {
		return nil
	}
	grace := rt.cfg.MaxGracePeriod
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		grace = min(grace, time.Duration(*s)*time.Second)
	}
	if s := pod.DeletionGracePeriodSeconds; s != nil {
		grace = min(grace, time.Duration(*s)*time.Second)
	}
	rt.log.Info("delete pod", "pod", podKey(pod.Namespace, pod.Name), "grace", grace)
	err := p.terminate(ctx, grace)

	rt.mu.Lock()
	if rt.pods[podKey(pod.Namespace, pod.Name)] == p {
		delete(rt.pods, podKey(pod.Namespace, pod.Name))
	}
	rt.mu.Unlock()
	if err == nil && pod.DeletionTimestamp != nil {
		rt.finalizeDelete(ctx, p.pod)
	}
	return err
}

// finalizeDelete removes a gracefully deleted pod from the API once everything of it
// is gone, as the kubelet does. virtual-kubelet would otherwise keep the object until
// the whole grace period has passed, however fast the containers stopped.
func (rt *Runtime) finalizeDelete(ctx context.Context, pod *corev1.Pod) {
	uid := pod.UID
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &uid}}
	err := rt.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		rt.log.Warn("delete terminated pod from the API", "pod", podKey(pod.Namespace, pod.Name), "error", err)
	}
}

// GetPod returns the pod as the runtime knows it, with its current status.
func (rt *Runtime) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	p := rt.lookup(namespace, name)
	if p == nil {
		return nil, errdefs.NotFoundf("pod %s/%s not found", namespace, name)
	}
	return p.snapshot(), nil
}

// GetPodStatus returns the pod's current status.
func (rt *Runtime) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := rt.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod the runtime runs.
func (rt *Runtime) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	rt.mu.Lock()
	list := make([]*podState, 0, len(rt.pods))
	for _, p := range rt.pods {
		list = append(list, p)
	}
	rt.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(list))
	for _, p := range list {
		out = append(out, p.snapshot())
	}
	return out, nil
}

// statusResync is how often every pod's status goes to the callback again,
// changed or not, as the kubelet's status manager resyncs. virtual-kubelet
// skips an unchanged status, and remembers that it did: when somebody else
// then changes the status in the API server (the node lifecycle controller
// marks pods not ready after the node looked unreachable, say after an
// API server outage), it puts the pod's own status back. Without a skipped
// resend it never would, and the pod stayed not ready for good.
const statusResync = 10 * time.Second

// NotifyPods registers the callback that receives every status change. It does not
// block: deliveries run on their own goroutine until ctx ends.
func (rt *Runtime) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	go rt.notifier.run(ctx, cb)
	go func() {
		t := time.NewTicker(statusResync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rt.mu.Lock()
			for _, p := range rt.pods {
				rt.notifier.add(p)
			}
			rt.mu.Unlock()
		}
	}()
}

// podDir is where a pod's state lives on the node.
func (rt *Runtime) podDir(uid string) string { return filepath.Join(rt.cfg.PodsDir, uid) }

// notifier coalesces status changes per pod and hands snapshots to the callback.
type notifier struct {
	mu      sync.Mutex
	pending map[*podState]struct{}
	wake    chan struct{}
}

func newNotifier() *notifier {
	return &notifier{pending: map[*podState]struct{}{}, wake: make(chan struct{}, 1)}
}

func (n *notifier) add(p *podState) {
	n.mu.Lock()
	n.pending[p] = struct{}{}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run(ctx context.Context, cb func(*corev1.Pod)) {
	for {
		n.mu.Lock()
		batch := n.pending
		n.pending = map[*podState]struct{}{}
		n.mu.Unlock()
		for p := range batch {
			cb(p.snapshot())
		}
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
	}
}
