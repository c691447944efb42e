package health

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cilium-go/cilium/operator/k8s"
)

type leading bool

func (l leading) IsLeader() bool { return bool(l) }

func get(t *testing.T, h http.Handler) (int, Status) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, st
}

func TestHealthzFollowsTheAPIServer(t *testing.T) {
	kube := kubefake.NewClientset()
	h := Handler(k8s.Clients{Kube: kube}, leading(true))
	if code, st := get(t, h); code != http.StatusOK || !st.OK || !st.Leading {
		t.Fatalf("API up: %d %+v", code, st)
	}
	kube.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	code, st := get(t, Handler(k8s.Clients{Kube: kube}, leading(false)))
	if code != http.StatusServiceUnavailable || st.OK || st.Leading || !strings.Contains(st.Error, "connection refused") {
		t.Fatalf("API down: %d %+v", code, st)
	}
}

func TestConfigValidate(t *testing.T) {
	for addr, ok := range map[string]bool{"": true, ":9234": true, "127.0.0.1:1": true, "9234": false} {
		if err := (Config{OperatorAPIServeAddr: addr}).Validate(); (err == nil) != ok ||
			(err != nil && !strings.Contains(err.Error(), "--operator-api-serve-addr")) {
			t.Errorf("%q: %v", addr, err)
		}
	}
}
