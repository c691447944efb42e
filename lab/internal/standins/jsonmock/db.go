package jsonmock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// object is a JSON object that keeps its keys in order, as Node does: a record
// reads back the way it was written.
type object []field

type field struct {
	Key   string
	Value json.RawMessage
}

func (o object) get(key string) (json.RawMessage, bool) {
	for _, f := range o {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// set replaces key's value in place, or appends it.
func (o object) set(key string, v json.RawMessage) object {
	for i := range o {
		if o[i].Key == key {
			o[i].Value = v
			return o
		}
	}
	return append(o, field{key, v})
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(f.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o *object) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	out := object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out = out.set(key, v)
	}
	*o = out
	return nil
}

// valueString is a JSON value the way JavaScript's String() prints it, which is
// how json-server compares ids and query filters with URL text.
func valueString(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(v))
}

// resource is one top-level key of the database: a collection (an array of
// records with ids) or a singular object.
type resource struct {
	items    []object // collection
	single   object   // singular
	isSingle bool
}

// parseDB reads a json-server database: an object whose values are arrays of
// objects or objects.
func parseDB(data []byte) (object, map[string]*resource, error) {
	var top object
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, nil, fmt.Errorf("database: %w", err)
	}
	res := make(map[string]*resource, len(top))
	for _, f := range top {
		r := &resource{}
		trimmed := bytes.TrimSpace(f.Value)
		switch {
		case len(trimmed) > 0 && trimmed[0] == '[':
			if err := json.Unmarshal(trimmed, &r.items); err != nil {
				return nil, nil, fmt.Errorf("database: %q: not an array of objects: %w", f.Key, err)
			}
		case len(trimmed) > 0 && trimmed[0] == '{':
			r.isSingle = true
			if err := json.Unmarshal(trimmed, &r.single); err != nil {
				return nil, nil, fmt.Errorf("database: %q: %w", f.Key, err)
			}
		default:
			return nil, nil, fmt.Errorf("database: %q: want an array or an object", f.Key)
		}
		res[f.Key] = r
	}
	return top, res, nil
}

func (r *resource) find(id string) int {
	for i, it := range r.items {
		if v, ok := it.get("id"); ok && valueString(v) == id {
			return i
		}
	}
	return -1
}

// nextID is json-server's: one more than the largest integer id, 1 for an empty
// collection.
func (r *resource) nextID() json.RawMessage {
	next := int64(1)
	for _, it := range r.items {
		v, ok := it.get("id")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n >= next {
			next = n + 1
		}
	}
	return json.RawMessage(strconv.FormatInt(next, 10))
}
