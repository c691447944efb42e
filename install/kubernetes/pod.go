package kubernetes

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ConfigMapName is the ConfigMap of the agent's and operator's settings.
const ConfigMapName = "cilium-config"

// ConfigFiles returns what the container called container of spec finds in
// the directory its --config-dir argument names: file name to content, from
// the cilium-config keys that the mounted volume projects. It fails when
// that directory is not a cilium-config volume or an item names a key the
// ConfigMap lacks (the kubelet would not start the pod).
func ConfigFiles(spec *corev1.PodSpec, container string) (map[string]string, error) {
	c, err := findContainer(spec, container)
	if err != nil {
		return nil, err
	}
	dir := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+ConfigDirFlag+"="); ok {
			dir = v
		}
	}
	if dir == "" {
		return nil, fmt.Errorf("container %s: no --%s argument", container, ConfigDirFlag)
	}
	var vol string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			vol = m.Name
		}
	}
	var src *corev1.ConfigMapVolumeSource
	for _, v := range spec.Volumes {
		if v.Name == vol && v.ConfigMap != nil && v.ConfigMap.Name == ConfigMapName {
			src = v.ConfigMap
		}
	}
	if src == nil {
		return nil, fmt.Errorf("container %s: %s is not a mounted %s volume", container, dir, ConfigMapName)
	}
	cm, err := Object[*corev1.ConfigMap](ConfigMapName)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if len(src.Items) == 0 {
		for k, v := range cm.Data {
			out[k] = v
		}
		return out, nil
	}
	for _, it := range src.Items {
		v, ok := cm.Data[it.Key]
		if !ok {
			return nil, fmt.Errorf("container %s: item %s: no such key in %s", container, it.Key, ConfigMapName)
		}
		out[it.Path] = v
	}
	return out, nil
}

func findContainer(spec *corev1.PodSpec, name string) (*corev1.Container, error) {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("no container %s", name)
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// Args returns the arguments the kubelet runs container c with: $(VAR)
// expanded from c's env, whose fieldRefs take their values from fields
// (field path to value). A reference to no variable, or a fieldRef without
// a value in fields, is an error: the kubelet would pass the reference on
// as it is.
func Args(c *corev1.Container, fields map[string]string) ([]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				return nil, fmt.Errorf("container %s: env %s: no value for %s", c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		}
	}
	var out []string
	var errs []error
	for _, a := range c.Args {
		out = append(out, varRef.ReplaceAllStringFunc(a, func(m string) string {
			name := varRef.FindStringSubmatch(m)[1]
			v, ok := env[name]
			if !ok {
				errs = append(errs, fmt.Errorf("container %s: arg %q: $(%s) is no env variable", c.Name, a, name))
				return m
			}
			return v
		}))
	}
	return out, errors.Join(errs...)
}
