package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// remoteObject is a JavaScript value as the protocol describes it.
type remoteObject struct {
	Type                string          `json:"type"`
	Subtype             string          `json:"subtype"`
	Value               json.RawMessage `json:"value"`
	UnserializableValue string          `json:"unserializableValue"`
	Description         string          `json:"description"`
	ObjectID            string          `json:"objectId"`
}

// String is the value as console.log would show it, roughly.
func (o remoteObject) String() string {
	switch {
	case o.Type == "string":
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
	case o.UnserializableValue != "":
		return o.UnserializableValue
	case o.Description != "":
		return o.Description
	case len(o.Value) > 0:
		return string(o.Value)
	}
	return o.Type
}

type exceptionDetails struct {
	Text         string        `json:"text"`
	URL          string        `json:"url"`
	LineNumber   int           `json:"lineNumber"`
	ColumnNumber int           `json:"columnNumber"`
	Exception    *remoteObject `json:"exception"`
}

// message is "Uncaught Error: boom": the protocol's text and the first
// line of the thrown value's description, without the stack under it.
func (d exceptionDetails) message() string {
	if d.Exception == nil {
		return d.Text
	}
	desc, _, _ := strings.Cut(d.Exception.String(), "\n")
	return d.Text + " " + desc
}

// Navigate loads url in the page and waits for its load event.
func (b *Browser) Navigate(ctx context.Context, url string) error {
	// Load events are collected from before the navigation starts:
	// nothing promises that Page.navigate's reply comes first.
	var (
		mu     sync.Mutex
		loaded []string // loader ids whose document fired load
		seen   = make(chan struct{}, 1)
	)
	off := b.conn.on("Page.lifecycleEvent", func(sessionID string, params json.RawMessage) {
		var e struct {
			LoaderID string `json:"loaderId"`
			Name     string `json:"name"`
		}
		if sessionID != b.session || json.Unmarshal(params, &e) != nil || e.Name != "load" {
			return
		}
		mu.Lock()
		loaded = append(loaded, e.LoaderID)
		mu.Unlock()
		select {
		case seen <- struct{}{}:
		default:
		}
	})
	defer off()

	var nav struct {
		LoaderID  string `json:"loaderId"`
		ErrorText string `json:"errorText"`
	}
	if err := b.Call(ctx, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return fmt.Errorf("navigate to %s: %w", url, err)
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, nav.ErrorText)
	}
	if nav.LoaderID == "" {
		return nil // within the document (a fragment): no new load
	}
	for {
		mu.Lock()
		done := slices.Contains(loaded, nav.LoaderID)
		mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-seen:
		case <-b.conn.done:
			return fmt.Errorf("navigate to %s: %w", url, b.conn.failed())
		case <-ctx.Done():
			return fmt.Errorf("navigate to %s: wait for load: %w", url, ctx.Err())
		}
	}
}

// evaluate runs js in the page's main frame and returns its value, by
// value or as a remote object. A promise is awaited. An exception is an
// error with its message.
func (b *Browser) evaluate(ctx context.Context, js string, byValue bool) (remoteObject, error) {
	var r struct {
		Result    remoteObject      `json:"result"`
		Exception *exceptionDetails `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": js, "returnByValue": byValue, "awaitPromise": true}
	if err := b.Call(ctx, "Runtime.evaluate", params, &r); err != nil {
		return remoteObject{}, fmt.Errorf("evaluate %s: %w", short(js), err)
	}
	if r.Exception != nil {
		return remoteObject{}, fmt.Errorf("evaluate %s: %s", short(js), r.Exception.message())
	}
	return r.Result, nil
}

// short shortens a script for an error message.
func short(js string) string {
	if len(js) > 80 {
		js = js[:77] + "..."
	}
	return fmt.Sprintf("%q", js)
}

// Eval runs the JavaScript expression js in the page, waits for it if it
// is a promise, and decodes its value into out as JSON (out may be nil).
// A thrown exception or a rejected promise is an error with its message;
// so is a value JSON cannot hold (undefined, NaN) when out is not nil.
func (b *Browser) Eval(ctx context.Context, js string, out any) error {
	o, err := b.evaluate(ctx, js, true)
	if err != nil || out == nil {
		return err
	}
	if len(o.Value) == 0 {
		return fmt.Errorf("evaluate %s: result %s is not JSON", short(js), o)
	}
	if err := json.Unmarshal(o.Value, out); err != nil {
		return fmt.Errorf("evaluate %s: %w", short(js), err)
	}
	return nil
}

// WaitFor polls the JavaScript expression js until it is true, and returns
// an error naming js and its last value or exception if that has not
// happened within timeout (or before ctx ends). An exception is just a
// false: the page may be between documents, or not have built the element
// yet.
func (b *Browser) WaitFor(ctx context.Context, js string, timeout time.Duration) error {
	return waitFor(ctx, js, timeout, func(ctx context.Context) (bool, string, error) {
		o, err := b.evaluate(ctx, js, true)
		return err == nil && string(o.Value) == "true", o.String(), err
	}, b.conn.failed)
}

// Screenshot writes a PNG of the page's viewport to path.
func (b *Browser) Screenshot(ctx context.Context, path string) error {
	var r struct {
		Data string `json:"data"`
	}
	if err := b.Call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return nil
}

// Metrics returns the page's performance counters by name: JSHeapUsedSize
// and JSHeapTotalSize (bytes), Nodes, JSEventListeners, LayoutCount,
// TaskDuration (seconds) and the rest of Performance.getMetrics.
func (b *Browser) Metrics(ctx context.Context) (map[string]float64, error) {
	var r struct {
		Metrics []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"metrics"`
	}
	if err := b.Call(ctx, "Performance.getMetrics", nil, &r); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	m := make(map[string]float64, len(r.Metrics))
	for _, x := range r.Metrics {
		m[x.Name] = x.Value
	}
	return m, nil
}

// CollectGarbage runs a full garbage collection of the page's JS heap:
// before Metrics, it makes JSHeapUsedSize what is live, not what the
// collector has not got to yet.
func (b *Browser) CollectGarbage(ctx context.Context) error {
	if err := b.Call(ctx, "HeapProfiler.collectGarbage", nil, nil); err != nil {
		return fmt.Errorf("collect garbage: %w", err)
	}
	return nil
}

// SetFileInput selects files for the <input type=file> that the CSS
// selector matches, as a user choosing them would: the input's change
// event fires. Relative paths are made absolute.
func (b *Browser) SetFileInput(ctx context.Context, selector string, paths ...string) error {
	abs := make([]string, len(paths))
	for i, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("set file input %s: %w", selector, err)
		}
		abs[i] = a
	}
	// A JSON string is a JavaScript string literal: the selector goes in
	// quoted, whatever it holds.
	sel, _ := json.Marshal(selector)
	o, err := b.evaluate(ctx, "document.querySelector("+string(sel)+")", false)
	if err != nil {
		return fmt.Errorf("set file input %s: %w", selector, err)
	}
	if o.ObjectID == "" {
		return fmt.Errorf("set file input %s: no element matches", selector)
	}
	// The handle keeps the element alive in the page: let it go, so that
	// it does not count in a memory benchmark's heap.
	defer b.Call(ctx, "Runtime.releaseObject", map[string]any{"objectId": o.ObjectID}, nil)
	params := map[string]any{"files": abs, "objectId": o.ObjectID}
	if err := b.Call(ctx, "DOM.setFileInputFiles", params, nil); err != nil {
		return fmt.Errorf("set file input %s: %w", selector, err)
	}
	return nil
}
