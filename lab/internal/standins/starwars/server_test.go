package starwars

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The demo's commands get the answers Cilium's getting-started guide
// prints.
func TestDemoAnswers(t *testing.T) {
	srv := httptest.NewServer(Handler("deathstar-0"))
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"POST", "/v1/request-landing", 200, "Ship landed\n"},
		{"PUT", "/v1/exhaust-port", 503, "Panic: deathstar exploded\n"},
		{"GET", "/v1/healthz", 200, "OK\n"},
		{"GET", "/v1/request-landing", 405, ""},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.HasPrefix(string(b), tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, b, tc.code, tc.body)
		}
	}
	resp, err := http.Get(srv.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"deathstar-0"`) || !strings.Contains(string(b), "POST  /v1/request-landing") {
		t.Errorf("GET /v1: %s", b)
	}
}
