package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
)

// render writes v as indented JSON with -o json, else as the table that
// table writes. Empty lists print as [] in JSON and as the header alone in
// tables, so that a script can tell "nothing" from "failed".
func (o *options) render(v any, table func(w *tabwriter.Writer)) error {
	if o.output == outputJSON {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		_, err = fmt.Fprintf(o.out, "%s\n", b)
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
