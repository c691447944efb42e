package crdinstall

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cilium-go/cilium/install/kubernetes/crds"
)

// establishOnWrite plays the API server's CRD controller: every created or
// updated CRD is established at once.
func establishOnWrite(cs *fake.Clientset) {
	mark := func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(interface{ GetObject() runtime.Object }).GetObject().(*apiextensionsv1.CustomResourceDefinition)
		obj.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
		return false, nil, nil
	}
	cs.PrependReactor("create", "customresourcedefinitions", mark)
	cs.PrependReactor("update", "customresourcedefinitions", mark)
}

func TestInstall(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	outdated := all[0].DeepCopy()
	outdated.Spec.Versions[0].Served = false
	outdated.Labels = nil
	for _, tc := range []struct {
		name      string
		existing  []runtime.Object
		establish bool
		wantVerbs map[string]int
		wantErr   string
	}{
		{name: "fresh cluster", establish: true, wantVerbs: map[string]int{"create": len(all)}},
		{name: "upgrade one", existing: []runtime.Object{outdated}, establish: true,
			wantVerbs: map[string]int{"create": len(all) - 1, "update": 1}},
		{name: "never established", wantErr: "not established"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.existing...)
			if tc.establish {
				establishOnWrite(cs)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := Install(ctx, hivetest.Logger(t), cs, all)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			verbs := map[string]int{}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "get" {
					verbs[a.GetVerb()]++
				}
			}
			for v, n := range tc.wantVerbs {
				if verbs[v] != n {
					t.Errorf("%d %s calls, want %d (all %v)", verbs[v], v, n, verbs)
				}
			}
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, outdated.Name, metav1.GetOptions{})
			if err != nil || !got.Spec.Versions[0].Served {
				t.Fatalf("after install: %+v %v", got, err)
			}
			// A second run finds everything current and writes nothing.
			cs.ClearActions()
			if err := Install(ctx, hivetest.Logger(t), cs, all); err != nil {
				t.Fatal(err)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "get" {
					t.Errorf("second install: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

func TestInstallNamesCRDOnError(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	cs.PrependReactor("create", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	err = Install(context.Background(), hivetest.Logger(t), cs, all)
	if err == nil || !strings.Contains(err.Error(), "create CRD "+all[0].Name) {
		t.Fatalf("error %v", err)
	}
}
