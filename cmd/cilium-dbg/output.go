package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/util/jsonpath"
)

// checkOutput validates -o: table, json, or jsonpath=TEMPLATE as Cilium's
// cilium-dbg takes it (cilium-cli runs `policy get -o jsonpath='{.revision}'`).
func (o *options) checkOutput() error {
	switch {
	case o.output == outputTable, o.output == outputJSON:
		return nil
	case strings.HasPrefix(o.output, jsonpathPrefix):
		if _, err := parseJSONPath(strings.TrimPrefix(o.output, jsonpathPrefix)); err != nil {
			return fmt.Errorf("--output %q: %w", o.output, err)
		}
		return nil
	}
	return fmt.Errorf("--output %q: want table, json or jsonpath=TEMPLATE", o.output)
}

const jsonpathPrefix = "jsonpath="

func parseJSONPath(tmpl string) (*jsonpath.JSONPath, error) {
	p := jsonpath.New("output").AllowMissingKeys(true)
	if err := p.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("jsonpath: %w", err)
	}
	return p, nil
}

// structured reports whether the output is JSON or a jsonpath over it.
func (o *options) structured() bool { return o.output != outputTable }

// render writes v as indented JSON with -o json, the jsonpath template's
// result over v's JSON with -o jsonpath=..., else the table that table
// writes. With JSON output, v is Cilium's model of the answer, so that
// Cilium's tools decode it. Empty lists print as [] in JSON and as the
// header alone in tables, so that a script can tell "nothing" from "failed".
func (o *options) render(v any, table func(w *tabwriter.Writer)) error {
	switch {
	case o.output == outputJSON:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		_, err = fmt.Fprintf(o.out, "%s\n", b)
		return err
	case strings.HasPrefix(o.output, jsonpathPrefix):
		p, err := parseJSONPath(strings.TrimPrefix(o.output, jsonpathPrefix))
		if err != nil {
			return err
		}
		// The template sees JSON's names, not Go's.
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return fmt.Errorf("decode json: %w", err)
		}
		var buf bytes.Buffer
		if err := p.Execute(&buf, generic); err != nil {
			return fmt.Errorf("--output %q: %w", o.output, err)
		}
		_, err = fmt.Fprintf(o.out, "%s\n", buf.Bytes())
		return err
	}
	w := tabwriter.NewWriter(o.out, 0, 8, 2, ' ', 0)
	table(w)
	return w.Flush()
}

// row writes one tab-separated table row.
func row(w *tabwriter.Writer, cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(s, "\t"))
}

// orDash shows empty values as "-", so that columns stay aligned.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
