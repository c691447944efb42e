// Package jsonmock is the lab's stand-in for the quay.io/cilium/json-mock image,
// which Cilium's connectivity test runs as its echo servers: json-server (v0.17)
// serving a small JSON database, behind the image's middleware. It answers what
// the suite and its users ask of it: GET / (the readiness probe and most checks),
// the database's collections (/public, /private, /auth-header-required) and
// records, /db, /client-ip and /hostname, and json-server's writes (POST, PUT,
// PATCH, DELETE), kept in memory.
package jsonmock

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// DefaultDB is the image's /default.json.
const DefaultDB = `{
  "private": [
    { "id": 1, "body": "secret information" }
  ],
  "public": [
    { "id": 1, "body": "public information" }
  ],
  "auth-header-required": [
    { "id": 1, "body": "super secret information" }
  ]
}`

const (
	// authToken is what the image's middleware wants in the Authorization header
	// of requests under /auth-header-required.
	authToken = "Bearer 123456"
	// maxBody bounds a request body, maxDB the database: a client can make the
	// server grow, not without bound.
	maxBody = 1 << 20
	maxDB   = 16 << 20
)

// Server serves one database.
type Server struct {
	mu       sync.Mutex
	size     int // of the database, as JSON
	order    []string
	res      map[string]*resource
	hostname string
	// mappedV4 prints IPv4 clients as IPv4-mapped IPv6 addresses, as Node does
	// for a server listening on every address (json-server --host "").
	mappedV4 bool
	log      io.Writer
}

// New returns a server of the JSON database db; requests are logged to log.
func New(db []byte, hostname string, mappedV4 bool, log io.Writer) (*Server, error) {
	top, res, err := parseDB(db)
	if err != nil {
		return nil, err
	}
	s := &Server{res: res, size: len(db), hostname: hostname, mappedV4: mappedV4, log: log}
	for _, f := range top {
		s.order = append(s.order, f.Key)
	}
	return s, nil
}

// statusWriter remembers the status for the request log.
type statusWriter struct {
	http.ResponseWriter
	status, size int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

// ServeHTTP runs the image's middleware, then json-server's routes, and logs the
// request the way json-server's logger does ("GET /public 200 0.412 ms - 52").
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &statusWriter{ResponseWriter: rw}
	h := w.Header()
	h.Set("X-Powered-By", "Express")
	h.Set("Vary", "Origin, Accept-Encoding")
	h.Set("Access-Control-Allow-Credentials", "true")
	if o := r.Header.Get("Origin"); o != "" {
		h.Set("Access-Control-Allow-Origin", o)
	}
	s.serve(w, r)
	fmt.Fprintf(s.log, "%s %s %d %.3f ms - %d\n", r.Method, r.URL.RequestURI(), w.status,
		float64(time.Since(start).Microseconds())/1000, w.size)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	// The image's middleware matches path prefixes, for every method.
	switch {
	case strings.HasPrefix(path, "/auth-header-required") && r.Header.Get("Authorization") != authToken:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `Invalid Authorization header, try setting it to "Bearer 123456"`)
		return
	case strings.HasPrefix(path, "/client-ip"):
		writeJSON(w, http.StatusOK, object{{"client-ip", mustJSON(s.clientIP(r.RemoteAddr))}})
		return
	case strings.HasPrefix(path, "/hostname"):
		writeJSON(w, http.StatusOK, object{{"hostname", mustJSON(s.hostname)}})
		return
	}
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "GET,HEAD,PUT,PATCH,POST,DELETE")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Pragma", "no-cache")
	w.Header().Set("Expires", "-1")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		io.WriteString(w, indexPage)
	case path == "/db" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.mu.Lock()
		db := s.dump()
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, db)
	case len(parts) == 1 || len(parts) == 2:
		s.mu.Lock()
		status, body := s.route(r, parts)
		s.mu.Unlock()
		writeJSON(w, status, body)
	default:
		writeJSON(w, http.StatusNotFound, object{})
	}
}

// clientIP is the peer's address as the image's middleware prints it.
func (s *Server) clientIP(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		host, _, _ := net.SplitHostPort(remote)
		return host
	}
	a := ap.Addr()
	if s.mappedV4 && a.Is4() {
		return "::ffff:" + a.String()
	}
	return a.String()
}

func (s *Server) dump() object {
	var db object
	for _, name := range s.order {
		r := s.res[name]
		if r.isSingle {
			db = append(db, field{name, mustJSON(r.single)})
		} else {
			db = append(db, field{name, mustJSON(itemsOrEmpty(r.items))})
		}
	}
	return db
}

func itemsOrEmpty(items []object) []object {
	if items == nil {
		return []object{}
	}
	return items
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// writeJSON answers as Express's res.json does with json-server's two-space
// indentation.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

const indexPage = `<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>JSON Server</title></head>
<body>
<h1>JSON Server</h1>
<p>The lab's stand-in for quay.io/cilium/json-mock. Resources: <a href="db">/db</a>,
<a href="public">/public</a>, <a href="private">/private</a>,
<a href="auth-header-required">/auth-header-required</a>,
<a href="client-ip">/client-ip</a>, <a href="hostname">/hostname</a>.</p>
</body>
</html>
`
