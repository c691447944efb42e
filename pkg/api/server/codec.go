package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/ipam"
)

// maxBody bounds a request body; the largest legitimate one is far
// smaller.
const maxBody = 64 << 10

// errBadRequest marks errors that are the client's.
var errBadRequest = errors.New("bad request")

// Decode reads one JSON object into v: unknown fields, trailing data and
// oversized bodies are rejected, and a type error names its field.
func Decode(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if len(b) > maxBody {
		return fmt.Errorf("%w: body larger than %d bytes", errBadRequest, maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%w: %s: want %s, got %s", errBadRequest, te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the JSON object", errBadRequest)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, models.Error{Code: status, Message: err.Error()})
}

// statusOf maps the cells' errors to HTTP.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errBadRequest), errors.As(err, new(*PeerError)):
		return http.StatusBadRequest
	case errors.Is(err, endpoint.ErrNotFound), errors.Is(err, ipam.ErrNotAllocated):
		return http.StatusNotFound
	case errors.Is(err, endpoint.ErrConflict), errors.Is(err, endpoint.ErrAgentOwned):
		return http.StatusConflict
	case errors.Is(err, ipam.ErrExhausted), errors.Is(err, ipam.ErrNoPodCIDR), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func fail(w http.ResponseWriter, err error) { writeError(w, statusOf(err), err) }

// invalid marks a validation error as the client's.
func invalid(err error) error { return fmt.Errorf("%w: %w", errBadRequest, err) }
