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
			return s.replace(&res.single, body)
		case http.MethodPatch:
			return s.replace(&res.single, merge(res.single, body))
		}
		return http.StatusNotFound, object{}
	}
	if len(parts) == 1 {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return http.StatusOK, filter(res.items, r.URL.Query())
		case http.MethodPost:
			if _, ok := body.get("id"); !ok {
				body = append(object{{"id", res.nextID()}}, body...)
			} else if id, _ := body.get("id"); res.find(valueString(id)) >= 0 {
				return http.StatusInternalServerError, object{{"error", mustJSON("insert failed, duplicate id")}}
			}
			res.items = append(res.items, nil)
			if status, v := s.replace(&res.items[len(res.items)-1], body); status != http.StatusOK {
				res.items = res.items[:len(res.items)-1]
				return status, v
			}
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
		return s.replace(&res.items[i], append(object{{"id", id}}, deleteKey(body, "id")...))
	case http.MethodPatch:
		return s.replace(&res.items[i], merge(res.items[i], deleteKey(body, "id")))
	case http.MethodDelete:
		s.size -= len(mustJSON(res.items[i]))
		res.items = slices.Delete(res.items, i, i+1)
		return http.StatusOK, object{}
	}
	return http.StatusNotFound, object{}
}

// replace stores v at *at if the database stays within maxDB.
func (s *Server) replace(at *object, v object) (int, any) {
	delta := len(mustJSON(v))
	if *at != nil {
		delta -= len(mustJSON(*at))
	}
	if s.size+delta > maxDB {
		return http.StatusInsufficientStorage, object{{"error", mustJSON("the database is full (16 MiB)")}}
	}
	s.size += delta
	*at = v
	return http.StatusOK, v
}

// merge is o with patch's fields set, o left unchanged.
func merge(o, patch object) object {
	out := slices.Clone(o)
	for _, f := range patch {
		out = out.set(f.Key, f.Value)
	}
	return out
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
