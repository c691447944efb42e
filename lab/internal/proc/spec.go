// Package proc describes and runs the long-lived processes of the lab: control-plane
// components, node agents and per-node daemons, each inside the namespaces of the
// machine it belongs to.
package proc

// Namespaces names the namespace files a process joins. An empty field means the
// caller's own namespace of that kind.
type Namespaces struct {
	Net string
	Mnt string
	UTS string
}

// Empty reports whether the process stays in the caller's namespaces.
func (n Namespaces) Empty() bool { return n.Net == "" && n.Mnt == "" && n.UTS == "" }

// Spec is the desired state of one process. It is plain data: building a Spec has no
// side effects, starting it is the supervisor's job.
type Spec struct {
	// Name is unique in the lab, e.g. "kube-apiserver" or "node-agent/lab-node1".
	Name string
	Path string
	Args []string
	// Env is added to a minimal environment (PATH, HOME).
	Env        []string
	Dir        string
	Namespaces Namespaces
	// LogFile receives stdout and stderr, appended.
	LogFile string
	// Cgroup is a cgroup v2 directory the process is born in (with everything it
	// starts); empty means the supervisor's own.
	Cgroup string
}
