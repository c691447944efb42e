package podruntime

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podState is one pod on the node: its sandbox, network and containers.
type podState struct {
	rt     *Runtime
	dir    string
	ctx    context.Context // ends when the pod is being deleted
	cancel context.CancelFunc
	// alive ends once every container of a deleted pod has stopped: readiness
	// probes go on while containers run their preStop hooks and shut down.
	alive   context.Context
	killed  context.CancelFunc
	runDone chan struct{}
	wg      sync.WaitGroup // container supervisors

	termOnce   sync.Once
	termErr    error
	finishOnce sync.Once

	// pod is the pod as created; it is never modified, so it is read without mu.
	pod *corev1.Pod

	mu          sync.Mutex
	meta        *metav1.ObjectMeta // latest metadata from UpdatePod (labels change)
	startTime   metav1.Time
	sandbox     *sandboxProc
	netnsPath   string
	ips         []netip.Addr
	initCtrs    []*container
	containers  []*container
	initialized bool
	creating    string // why the sandbox is not ready yet
	finished    bool   // every container is final
	// failure is set when the node failed the pod: activeDeadlineSeconds ran
	// out (DeadlineExceeded) or it was evicted (Evicted).
	failure *podFailure
	deleted bool
	conds   map[corev1.PodConditionType]corev1.PodCondition
	tokens  map[string]cachedToken // by projection path and audience
}

type sandboxProc struct {
	id   string
	pid  int
	cmd  *exec.Cmd
	done chan struct{}
}

func newPodState(rt *Runtime, pod *corev1.Pod) *podState {
	ctx, cancel := context.WithCancel(context.Background())
	alive, killed := context.WithCancel(context.Background())
	p := &podState{
		rt:        rt,
		dir:       rt.podDir(string(pod.UID)),
		ctx:       ctx,
		cancel:    cancel,
		alive:     alive,
		killed:    killed,
		runDone:   make(chan struct{}),
		pod:       pod,
		startTime: metav1.Now(),
		creating:  "ContainerCreating",
		conds:     map[corev1.PodConditionType]corev1.PodCondition{},
	}
	for i := range pod.Spec.InitContainers {
		c := newContainer(rt, pod, &pod.Spec.InitContainers[i], true)
		p.initCtrs = append(p.initCtrs, c)
	}
	for i := range pod.Spec.Containers {
		p.containers = append(p.containers, newContainer(rt, pod, &pod.Spec.Containers[i], false))
	}
	return p
}

func (p *podState) key() string { return podKey(p.pod.Namespace, p.pod.Name) }

// apiPod returns a copy of the pod with its latest metadata, for the downward API
// and the Network.
func (p *podState) apiPod() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.apiPodLocked()
}

func (p *podState) apiPodLocked() *corev1.Pod {
	pod := p.pod.DeepCopy()
	if p.meta != nil {
		pod.ObjectMeta = *p.meta.DeepCopy()
	}
	return pod
}

func (p *podState) changed() { p.rt.notifier.add(p) }

// facts are the runtime values the downward API and env need. Callers hold no lock.
func (p *podState) facts() podFacts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.factsLocked()
}

// hostname is what the pod's UTS namespace is called: its name, spec.hostname, or
// the FQDN with setHostnameAsFQDN.
func (p *podState) hostname() string {
	host, fqdn := podHostname(p.pod, p.rt.cfg.ClusterDomain)
	if fqdn != "" && p.pod.Spec.SetHostnameAsFQDN != nil && *p.pod.Spec.SetHostnameAsFQDN {
		return fqdn
	}
	return host
}

func (p *podState) factsLocked() podFacts {
	f := podFacts{Hostname: p.hostname(), NodeIP: p.rt.cfg.NodeIP, PodIPs: p.ips}
	if p.pod.Spec.HostNetwork {
		f.Hostname, _ = os.Hostname()
		if p.rt.cfg.NodeIP.IsValid() {
			f.PodIPs = []netip.Addr{p.rt.cfg.NodeIP}
		}
	}
	f.NodeCPU = *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI)
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		f.NodeMemory = *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI)
	}
	return f
}

// refreshVolumes keeps API-projected volumes current, as the kubelet's periodic
// sync does: configMap and secret changes, downward API labels, fresh tokens.
func (p *podState) refreshVolumes() {
	t := time.NewTicker(p.rt.cfg.VolumeRefresh)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		finished := p.finished
		p.mu.Unlock()
		if finished {
			return
		}
		if _, err := p.prepareVolumes(p.ctx); err != nil && p.ctx.Err() == nil {
			p.rt.log.Warn("refresh volumes", "pod", p.key(), "error", err)
		}
	}
}

// run brings the pod up: sandbox and network, init containers in order, then the
// containers. It returns once every container has a supervisor, or the pod is deleted.
func (p *podState) run() {
	defer close(p.runDone)
	if !p.setupWithRetry() {
		return
	}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.refreshVolumes() }()
	if ads := p.pod.Spec.ActiveDeadlineSeconds; ads != nil {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.enforceDeadline(time.Duration(*ads) * time.Second) }()
	}
	if l := podStorageLimits(p.pod); l.any() {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.watchStorage(l) }()
	}
	for _, c := range p.initCtrs {
		if c.sidecar {
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.supervise(c) }()
			select {
			case <-c.startedCh:
			case <-p.ctx.Done():
				return
			}
			continue
		}
		if !p.supervise(c) {
			p.mu.Lock()
			failed := c.final
			p.mu.Unlock()
			if failed && p.ctx.Err() == nil {
				p.finish()
			}
			return
		}
	}
	p.mu.Lock()
	p.initialized = true
	p.mu.Unlock()
	p.changed()

	var regular sync.WaitGroup
	for _, c := range p.containers {
		regular.Add(1)
		p.wg.Add(1)
		go func() { defer p.wg.Done(); defer regular.Done(); p.supervise(c) }()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		regular.Wait()
		if p.ctx.Err() == nil {
			p.finish()
		}
	}()
}

// enforceDeadline fails the pod once it has been active for longer than its
// activeDeadlineSeconds, stopping every container, as the kubelet does.
func (p *podState) enforceDeadline(d time.Duration) {
	select {
	case <-p.ctx.Done():
		return
	case <-time.After(time.Until(p.startTime.Add(d))):
	}
	p.rt.log.Info("pod exceeded its active deadline", "pod", p.key())
	p.fail("DeadlineExceeded", "the pod ran longer than its activeDeadlineSeconds", p.gracePeriod())
}

// podFailure is why the node failed a pod, its status's reason and message.
type podFailure struct{ Reason, Message string }

// fail ends the pod in phase Failed with reason and message: every container
// stops (within grace) and none restarts, as when the kubelet fails or evicts
// a pod. The first failure stays.
func (p *podState) fail(reason, msg string, grace time.Duration) {
	p.mu.Lock()
	if p.failure == nil {
		p.failure = &podFailure{Reason: reason, Message: msg}
	}
	p.mu.Unlock()
	p.changed()
	all := append(append([]*container(nil), p.initCtrs...), p.containers...)
	var stops sync.WaitGroup
	for _, c := range all {
		p.markFinal(c)
		stops.Add(1)
		go func() { defer stops.Done(); p.stopContainer(c, grace) }()
	}
	stops.Wait()
	p.finish()
}

// finish runs when every regular container is final: sidecars stop and the sandbox
// and its network go away, as the kubelet does for completed pods. Logs stay.
func (p *podState) finish() {
	p.finishOnce.Do(p.doFinish)
}

func (p *podState) doFinish() {
	for _, c := range p.initCtrs {
		if c.sidecar {
			p.markFinal(c)
			p.stopContainer(c, p.gracePeriod())
		}
	}
	p.mu.Lock()
	p.finished = true
	p.mu.Unlock()
	if err := p.stopSandbox(context.Background()); err != nil {
		p.rt.log.Warn("stop sandbox of finished pod", "pod", p.key(), "error", err)
	}
	p.changed()
}

func (p *podState) gracePeriod() time.Duration {
	g := p.rt.cfg.MaxGracePeriod
	if s := p.pod.Spec.TerminationGracePeriodSeconds; s != nil {
		g = min(g, time.Duration(*s)*time.Second)
	}
	return g
}

// setupWithRetry prepares volumes, the sandbox and the network until it works,
// reporting the latest error as the containers' ContainerCreating message.
func (p *podState) setupWithRetry() bool {
	delay := 200 * time.Millisecond
	for {
		err := p.setup()
		if err == nil {
			p.mu.Lock()
			p.creating = ""
			p.mu.Unlock()
			p.changed()
			return true
		}
		if p.ctx.Err() != nil {
			return false
		}
		p.rt.log.Warn("pod setup", "pod", p.key(), "error", err)
		p.mu.Lock()
		p.creating = err.Error()
		p.mu.Unlock()
		p.changed()
		select {
		case <-p.ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

func (p *podState) setup() error {
	for _, d := range []string{p.dir, filepath.Join(p.dir, "etc"), filepath.Join(p.dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := p.saveRecord(); err != nil {
		return err
	}
	vols, err := p.prepareVolumes(p.ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	haveSandbox := p.sandbox != nil
	p.mu.Unlock()
	if !haveSandbox {
		if err := p.writeEtcFiles(); err != nil {
			return err
		}
		mounts, err := p.sandboxMounts(vols)
		if err != nil {
			return err
		}
		if err := p.startSandbox(mounts); err != nil {
			return err
		}
	}
	if p.pod.Spec.HostNetwork {
		return nil
	}
	p.mu.Lock()
	haveIPs := len(p.ips) > 0
	p.mu.Unlock()
	if haveIPs {
		return nil
	}
	return p.attachNetwork()
}

func (p *podState) writeEtcFiles() error {
	nodeHosts, _ := os.ReadFile("/etc/hosts")
	nodeResolv, _ := os.ReadFile("/etc/resolv.conf")
	p.mu.Lock()
	ips := p.ips
	p.mu.Unlock()
	host := p.hostname()
	if p.pod.Spec.HostNetwork {
		host, _ = os.Hostname()
	}
	files := map[string][]byte{
		"termination-log": nil,
		"hosts":           hostsFile(p.pod, ips, p.rt.cfg.ClusterDomain, nodeHosts),
		"hostname":        []byte(host + "\n"),
		"resolv.conf":     resolvConf(p.pod, p.rt.cfg.ClusterDNS, p.rt.cfg.ClusterDomain, nodeResolv),
	}
	for name, data := range files {
		if err := rewriteInPlace(filepath.Join(p.dir, "etc", name), data); err != nil {
			return err
		}
	}
	return nil
}

// sandboxMounts lists the mounts pod-init makes: image files, the pod's /etc files,
// then volumes.
func (p *podState) sandboxMounts(vols map[string]volumeSource) ([]mountSpec, error) {
	var out []mountSpec
	seen := map[string]bool{}
	for _, c := range append(append([]*container(nil), p.initCtrs...), p.containers...) {
		for _, f := range c.image.Files {
			if seen[f.Path] || c.imageErr != nil {
				continue
			}
			seen[f.Path] = true
			out = append(out, mountSpec{Source: f.Host, Target: f.Path, IsFile: true, ReadOnly: true})
		}
	}
	for _, name := range []string{"hosts", "hostname", "resolv.conf"} {
		out = append(out, mountSpec{Source: filepath.Join(p.dir, "etc", name), Target: "/etc/" + name, IsFile: true})
	}
	// /dev is the host's: a container writing its termination message there must
	// write into the pod directory instead.
	out = append(out, mountSpec{Source: filepath.Join(p.dir, "etc", "termination-log"), Target: "/dev/termination-log", IsFile: true})
	vm, err := volumeMounts(p.pod, vols)
	if err != nil {
		return nil, err
	}
	for _, m := range vm {
		if m.Propagation != string(corev1.MountPropagationBidirectional) {
			continue
		}
		// As the kubelet requires: otherwise the pod's mounts would stay its own.
		if err := checkShared(m.Source); err != nil {
			return nil, fmt.Errorf("mountPropagation Bidirectional for %s: %w", m.Target, err)
		}
	}
	return append(out, vm...), nil
}

func (p *podState) startSandbox(mounts []mountSpec) error {
	hostNet := p.pod.Spec.HostNetwork
	spec := sandboxSpec{
		Root:    filepath.Join(p.dir, "rootfs"),
		Scratch: filepath.Join(p.dir, "overlay"),
		NewNet:  !hostNet,
		Mounts:  mounts,
	}
	for _, c := range append(append([]corev1.Container(nil), p.pod.Spec.InitContainers...), p.pod.Spec.Containers...) {
		spec.Privileged = spec.Privileged || privileged(&c)
	}
	if !hostNet {
		spec.Hostname = p.hostname()
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	specPath := filepath.Join(p.dir, "sandbox.json")
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(p.dir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()

	flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWIPC)
	if !hostNet {
		flags |= unix.CLONE_NEWNET | unix.CLONE_NEWUTS
	}
	cmd := exec.Command(p.rt.cfg.SandboxBinary, "pod-init", specPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start sandbox: %w", err)
	}
	sb := &sandboxProc{id: newID(), pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(sb.done) }()
	p.mu.Lock()
	p.sandbox = sb
	p.mu.Unlock()
	if err := p.saveRecord(); err != nil {
		return err
	}

	// The pipe closes when pod-init exits, so this read cannot outlive it; the
	// deadline covers a pod-init that hangs.
	r.SetReadDeadline(time.Now().Add(time.Minute))
	line, _ := bufio.NewReader(r).ReadString('\n')
	if strings.TrimSpace(line) == "ok" {
		return nil
	}
	p.killSandbox()
	p.mu.Lock()
	p.sandbox = nil
	p.mu.Unlock()
	msg := strings.TrimSpace(strings.TrimPrefix(line, "error: "))
	if msg == "" {
		msg = "exited before it was ready"
	}
	return fmt.Errorf("sandbox: %s", msg)
}

// attachNetwork pins the sandbox's network namespace at <poddir>/netns (so CNI DEL
// works even after the sandbox is gone) and asks the Network for the pod IPs.
func (p *podState) attachNetwork() error {
	p.mu.Lock()
	sb := p.sandbox
	netnsPath := p.netnsPath
	p.mu.Unlock()
	if netnsPath == "" {
		netnsPath = filepath.Join(p.dir, "netns")
		if d := p.rt.cfg.NetnsDir; d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			netnsPath = filepath.Join(d, "cni-"+sb.id)
		}
		if err := os.WriteFile(netnsPath, nil, 0o444); err != nil {
			return err
		}
		src := fmt.Sprintf("/proc/%d/ns/net", sb.pid)
		if err := unix.Mount(src, netnsPath, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("pin netns: %w", err)
		}
		p.mu.Lock()
		p.netnsPath = netnsPath
		p.mu.Unlock()
		if err := p.saveRecord(); err != nil {
			return err
		}
	}
	if p.rt.cfg.Network == nil {
		return errors.New("no pod network configured")
	}
	ips, err := p.rt.cfg.Network.Add(p.ctx, p.apiPod(), sb.id, netnsPath)
	if err != nil {
		// Leave nothing half-attached for the retry.
		if derr := p.rt.cfg.Network.Del(context.Background(), p.apiPod(), sb.id, netnsPath); derr != nil {
			p.rt.log.Warn("network del after failed add", "pod", p.key(), "error", derr)
		}
		return fmt.Errorf("network add: %w", err)
	}
	if len(ips) == 0 {
		return errors.New("network add returned no IP")
	}
	p.mu.Lock()
	p.ips = ips
	p.mu.Unlock()
	p.rt.log.Info("pod network ready", "pod", p.key(), "ips", ips)
	return p.writeEtcFiles()
}

// stopSandbox detaches the network and stops pod-init. Idempotent.
func (p *podState) stopSandbox(ctx context.Context) error {
	p.mu.Lock()
	sb, netnsPath := p.sandbox, p.netnsPath
	p.netnsPath = ""
	p.mu.Unlock()
	var errs []error
	if netnsPath != "" {
		id := ""
		if sb != nil {
			id = sb.id
		}
		if p.rt.cfg.Network != nil {
			if err := p.rt.cfg.Network.Del(ctx, p.apiPod(), id, netnsPath); err != nil {
				errs = append(errs, fmt.Errorf("network del: %w", err))
			}
		}
		if err := unpinNetns(netnsPath, p.dir); err != nil {
			errs = append(errs, err)
		}
	}
	p.killSandbox()
	// The record must not send a later Cleanup to a namespace that is gone.
	if err := p.saveRecord(); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unpinNetns unmounts a pinned network namespace and removes its file when
// it lies outside the pod's directory (which goes as a whole).
func unpinNetns(path, podDir string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if strings.HasPrefix(path, podDir+"/") {
		return nil
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func (p *podState) killSandbox() {
	p.mu.Lock()
	sb := p.sandbox
	p.mu.Unlock()
	if sb == nil {
		return
	}
	sb.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-sb.done:
	case <-time.After(2 * time.Second):
		sb.cmd.Process.Kill()
		<-sb.done
	}
}

// terminate stops everything of the pod, as the kubelet stops a deleted pod: from
// now on nothing restarts and liveness and startup probes stop; every running
// container runs its preStop hook while it keeps serving, then gets SIGTERM, and
// SIGKILL when the grace period is over (stopContainer). Readiness probes go on
// until its container has stopped, so the pod's Ready condition says whether it
// still serves while terminating. The network goes last. The runtime forgets the
// pod afterwards.
func (p *podState) terminate(ctx context.Context, grace time.Duration) error {
	p.termOnce.Do(func() {
		p.cancel()
		defer p.killed()
		all := append(append([]*container(nil), p.initCtrs...), p.containers...)
		stopAll := func() {
			var stops sync.WaitGroup
			for _, c := range all {
				p.markFinal(c)
				stops.Add(1)
				go func() { defer stops.Done(); p.stopContainer(c, grace) }()
			}
			stops.Wait()
		}
		// run may be waiting for an init container: stop the containers first, then
		// wait for run, and stop again whatever started in between.
		stopAll()
		p.killed()
		<-p.runDone
		stopAll()
		p.wg.Wait()
		err := p.stopSandbox(ctx)
		if rerr := removePodDir(p.dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
		p.mu.Lock()
		p.deleted = true
		p.mu.Unlock()
		p.changed()
		p.termErr = err
	})
	return p.termErr
}

// removePodDir unmounts whatever the runtime mounted below dir (in the node's mount
// namespace) and removes it.
func removePodDir(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", mounts[i], err)
		}
	}
	return os.RemoveAll(dir)
}

// mountsUnder lists this mount namespace's mount points at or below dir, in mount order.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountPath(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func newID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}
