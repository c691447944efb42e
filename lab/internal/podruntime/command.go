package podruntime

import (
	"errors"

	"github.com/cilium-go/cilium/lab/internal/images"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

// containerArgv returns the argv a container runs, resolved like Docker and the
// kubelet do: the container's command replaces the image entrypoint (and drops the
// image's cmd), its args replace the image cmd, and $(VAR) references in both expand
// from the container's environment.
func containerArgv(img images.Image, c *corev1.Container, env []corev1.EnvVar) ([]string, error) {
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	mapping := expansion.MappingFuncFor(vars)
	expand := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = expansion.Expand(s, mapping)
		}
		return out
	}

	var argv []string
	switch {
	case len(c.Command) > 0:
		argv = append(expand(c.Command), expand(c.Args)...)
	case len(c.Args) > 0:
		argv = append(append([]string(nil), img.Entrypoint...), expand(c.Args)...)
	default:
		argv = append(append([]string(nil), img.Entrypoint...), img.Cmd...)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("no command specified")
	}
	return argv, nil
}
