package jsonmock

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
)

// route serves json-server's REST routes: /name and /name/id for a collection,
// /name for a singular resource. s.mu is held.
func (s *Server) route(r *http.Request, parts []string) (int, any) {
	res, ok := s.res[parts[0]]
	if !ok {
		// json-server creates no resource that the database lacks.
		return http.StatusNotFound, object{}
	}
	var body object
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		var err error
		if body, err = readBody(r); err != nil {
			return http.StatusBadRequest, object{{"error", mustJSON(err.Error())}}
		}
	}
	if res.isSingle {
		if len(parts) != 1 {
			return http.StatusNotFound, object{}
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return http.StatusOK, res.single
		case http.MethodPut:
			res.single = body
			return http.StatusOK, res.single
		case http.MethodPatch:
			for _, f := range body {
				res.single = res.single.set(f.Key, f.Value)
			}
			return http.StatusOK, res.single
		}
		return http.StatusNotFound, object{}
	}
	if len(parts) == 1 {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return http.StatusOK, filter(res.items, r.URL.Query())
		case http.MethodPost:
			if len(res.items) >= maxItems {
				return http.StatusInsufficientStorage, object{{"error", mustJSON("collection is full")}}
			}
			if _, ok := body.get("id"); !ok {
				body = append(object{{"id", res.nextID()}}, body...)
			} else if id, _ := body.get("id"); res.find(valueString(id)) >= 0 {
				return http.StatusInternalServerError, object{{"error", mustJSON("insert failed, duplicate id")}}
			}
			res.items = append(res.items, body)
			return http.StatusCreated, body
		}
		return http.StatusNotFound, object{}
	}
	i := res.find(parts[1])
	if i < 0 {
		return http.StatusNotFound, object{}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return http.StatusOK, res.items[i]
	case http.MethodPut:
		id, _ := res.items[i].get("id")
		res.items[i] = append(object{{"id", id}}, deleteKey(body, "id")...)
		return http.StatusOK, res.items[i]
	case http.MethodPatch:
		for _, f := range deleteKey(body, "id") {
			res.items[i] = res.items[i].set(f.Key, f.Value)
		}
		return http.StatusOK, res.items[i]
	case http.MethodDelete:
		res.items = slices.Delete(res.items, i, i+1)
		return http.StatusOK, object{}
	}
	return http.StatusNotFound, object{}
}

func deleteKey(o object, key string) object {
	return slices.DeleteFunc(slices.Clone(o), func(f field) bool { return f.Key == key })
}

// filter keeps the records whose fields equal the query's values (any of them
// when a key repeats), ignoring json-server's "_" options and full-text "q".
func filter(items []object, q map[string][]string) []object {
	out := []object{}
	for _, it := range items {
		keep := true
		for k, vals := range q {
			if strings.HasPrefix(k, "_") || k == "q" {
				continue
			}
			v, ok := it.get(k)
			if !ok || !slices.Contains(vals, valueString(v)) {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, it)
		}
	}
	return out
}

func readBody(r *http.Request) (object, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBody {
		return nil, errors.New("request body larger than 1 MiB")
	}
	if strings.TrimSpace(string(data)) == "" {
		return object{}, nil
	}
	var o object
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, errors.New("request body is not a JSON object: " + err.Error())
	}
	return o, nil
}
