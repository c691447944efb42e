package k8stest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cilium/hive/script"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
)

// Trackers are the object stores behind the fake clientsets that the
// script commands write to: kubefake.Clientset.Tracker() and
// client.Fake.Tracker.
type Trackers struct {
	Kube, Cilium k8stesting.ObjectTracker
}

// scheme decodes both Kubernetes' kinds and Cilium's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kubescheme.AddToScheme, v2.AddToScheme, v2alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

var decoder = serializer.NewCodecFactory(scheme).UniversalDeserializer()

// ScriptCmds are the script commands that change what the fake API
// server holds, as a user's kubectl would; watchers see each change:
//
//	k8s/add FILE...     create the objects (a file may hold several, separated by ---)
//	k8s/update FILE...  replace them
//	k8s/delete FILE...  delete them (by kind, namespace and name)
func ScriptCmds(tr Trackers) map[string]script.Cmd {
	cmd := func(summary string, apply func(k8stesting.ObjectTracker, runtime.Object) error) script.Cmd {
		return script.Command(script.CmdUsage{Summary: summary, Args: "file..."},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) == 0 {
					return nil, script.ErrUsage
				}
				for _, file := range args {
					objs, err := decodeFile(s.Path(file))
					if err != nil {
						return nil, err
					}
					for _, obj := range objs {
						tracker := tr.Kube
						if obj.GetObjectKind().GroupVersionKind().Group == v2.SchemeGroupVersion.Group {
							tracker = tr.Cilium
						}
						if err := apply(tracker, obj); err != nil {
							return nil, fmt.Errorf("%s: %w", file, err)
						}
					}
				}
				return nil, nil
			})
	}
	return map[string]script.Cmd{
		"k8s/add": cmd("create Kubernetes objects", func(t k8stesting.ObjectTracker, obj runtime.Object) error {
			m, gvr := meta.NewAccessor(), resource(obj)
			ns, _ := m.Namespace(obj)
			return t.Create(gvr, obj, ns)
		}),
		"k8s/update": cmd("replace Kubernetes objects", func(t k8stesting.ObjectTracker, obj runtime.Object) error {
			m, gvr := meta.NewAccessor(), resource(obj)
			ns, _ := m.Namespace(obj)
			return t.Update(gvr, obj, ns)
		}),
		"k8s/delete": cmd("delete Kubernetes objects", func(t k8stesting.ObjectTracker, obj runtime.Object) error {
			m, gvr := meta.NewAccessor(), resource(obj)
			ns, _ := m.Namespace(obj)
			name, _ := m.Name(obj)
			return t.Delete(gvr, ns, name)
		}),
	}
}

func resource(obj runtime.Object) schema.GroupVersionResource {
	gvr, _ := meta.UnsafeGuessKindToResource(obj.GetObjectKind().GroupVersionKind())
	return gvr
}

// decodeFile reads the YAML documents of a file into typed objects.
func decodeFile(path string) ([]runtime.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		out = append(out, obj)
	}
}
