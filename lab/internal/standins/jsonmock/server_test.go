package jsonmock

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func do(t *testing.T, srv http.Handler, method, path, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "10.0.0.7:41234"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b), w.Result().Header
}

func TestServesTheImagesDatabase(t *testing.T) {
	srv, err := New([]byte(DefaultDB), "echo-same-node-1", true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, body string
		hdr                []string
		status             int
		want               string
	}{
		{method: "GET", path: "/", status: 200, want: "JSON Server"},
		{method: "HEAD", path: "/", status: 200},
		{method: "GET", path: "/public", status: 200, want: "[\n  {\n    \"id\": 1,\n    \"body\": \"public information\"\n  }\n]"},
		{method: "GET", path: "/private/1", status: 200, want: "{\n  \"id\": 1,\n  \"body\": \"secret information\"\n}"},
		{method: "GET", path: "/private/2", status: 404, want: "{}"},
		{method: "GET", path: "/public?id=1", status: 200, want: "public information"},
		{method: "GET", path: "/public?id=2", status: 200, want: "[]"},
		{method: "GET", path: "/nothing", status: 404, want: "{}"},
		{method: "GET", path: "/a/b/c", status: 404, want: "{}"},
		{method: "GET", path: "/auth-header-required", status: 401, want: `Invalid Authorization header, try setting it to "Bearer 123456"`},
		{method: "GET", path: "/auth-header-required", hdr: []string{"Authorization", "Bearer 1234567"}, status: 401},
		{method: "GET", path: "/auth-header-required", hdr: []string{"Authorization", "Bearer 123456"}, status: 200, want: "super secret information"},
		// Node prints an IPv4 peer of a dual-stack socket as a mapped address.
		{method: "GET", path: "/client-ip", status: 200, want: "{\n  \"client-ip\": \"::ffff:10.0.0.7\"\n}"},
		{method: "GET", path: "/client-ip/anything", status: 200, want: "::ffff:10.0.0.7"},
		{method: "GET", path: "/hostname", status: 200, want: "{\n  \"hostname\": \"echo-same-node-1\"\n}"},
		{method: "GET", path: "/db", status: 200, want: "\"auth-header-required\": ["},
		{method: "POST", path: "/public", body: `{"body":"new"}`, status: 201, want: "{\n  \"id\": 2,\n  \"body\": \"new\"\n}"},
		{method: "GET", path: "/public/2", status: 200, want: "new"},
		{method: "PATCH", path: "/public/2", body: `{"extra":true}`, status: 200, want: "\"extra\": true"},
		{method: "PUT", path: "/public/2", body: `{"body":"replaced"}`, status: 200, want: "{\n  \"id\": 2,\n  \"body\": \"replaced\"\n}"},
		{method: "DELETE", path: "/public/2", status: 200, want: "{}"},
		{method: "GET", path: "/public/2", status: 404},
		{method: "POST", path: "/public", body: `[1,2]`, status: 400, want: "not a JSON object"},
		{method: "POST", path: "/public", body: `{"id":1}`, status: 500, want: "duplicate id"},
	} {
		status, body, _ := do(t, srv, tc.method, tc.path, tc.body, tc.hdr...)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %q; want %d and %q", tc.method, tc.path, status, body, tc.status, tc.want)
		}
	}
	_, _, hdr := do(t, srv, "GET", "/public", "", "Origin", "http://x")
	if hdr.Get("Content-Type") != "application/json; charset=utf-8" || hdr.Get("Access-Control-Allow-Origin") != "http://x" ||
		hdr.Get("X-Powered-By") != "Express" {
		t.Errorf("headers %v", hdr)
	}
}

func TestClientIPWithoutDualStack(t *testing.T) {
	srv, err := New([]byte(DefaultDB), "h", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, body, _ := do(t, srv, "GET", "/client-ip", ""); !strings.Contains(body, `"client-ip": "10.0.0.7"`) {
		t.Errorf("body %q", body)
	}
}

func TestBadDatabase(t *testing.T) {
	for _, db := range []string{``, `[]`, `{"a": 1}`, `{"a": [1]}`, `{"a": [{}], `} {
		if _, err := New([]byte(db), "h", false, io.Discard); err == nil || !strings.Contains(err.Error(), "database") {
			t.Errorf("New(%q) = %v, want a database error", db, err)
		}
	}
}

func TestMainRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{env: map[string]string{"PORT": "http"}, want: `PORT="http" is not a port number`},
		{env: map[string]string{"MIDDLEWARE": "/my.js"}, want: "middleware /my.js"},
		{args: []string{"--middlewares", "/x.js"}, want: "middleware /x.js"},
		{args: []string{"/does/not/exist.json"}, want: "no such file"},
	} {
		var stderr strings.Builder
		code := Main(tc.args, func(k string) string { return tc.env[k] }, io.Discard, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("Main(%q, %v) = %d, %q; want an error with %q", tc.args, tc.env, code, stderr.String(), tc.want)
		}
	}
}

// Writes stop at the database's bound, with an error saying so.
func TestDatabaseIsBounded(t *testing.T) {
	srv, err := New([]byte(DefaultDB), "h", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	big := `{"body":"` + strings.Repeat("x", 900<<10) + `"}`
	var status int
	var body string
	for i := 0; i < 40 && status != 507; i++ {
		status, body, _ = do(t, srv, "POST", "/public", big)
	}
	if status != 507 || !strings.Contains(body, "database is full") {
		t.Fatalf("after 40 posts of 900 KiB: %d %.80q", status, body)
	}
	// Deleting makes room again.
	if status, _, _ := do(t, srv, "DELETE", "/public/2", ""); status != 200 {
		t.Fatalf("DELETE: %d", status)
	}
	if status, body, _ := do(t, srv, "POST", "/public", big); status != 201 {
		t.Errorf("POST after a DELETE: %d %.80q", status, body)
	}
}
