package main

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	valid := func() options {
		o := options{base: "afa0859", parts: partNames(), reps: 3, flags: map[string][]string{}}
		for _, p := range allParts {
			o.flags[p.name] = p.defaults
		}
		return o
	}
	for _, tc := range []struct {
		name  string
		tweak func(*options)
		err   string // a part of the error; "" for none
	}{
		{"defaults", func(*options) {}, ""},
		{"no base", func(o *options) { o.base = "" }, "-base: required"},
		{"a flag as base", func(o *options) { o.base = "-x" }, "not a revision"},
		{"no parts", func(o *options) { o.parts = nil }, "name at least one"},
		{"unknown part", func(o *options) { o.parts = []string{"cni", "dns"} }, `-parts "dns"`},
		{"a part twice", func(o *options) { o.parts = []string{"cni", "cni"} }, "cni twice"},
		{"no repetitions", func(o *options) { o.reps = 0 }, "-reps 0"},
		{"too many repetitions", func(o *options) { o.reps = 51 }, "-reps 51"},
		{"the command's -bin", func(o *options) { o.flags["cni"] = []string{"-rounds", "2", "-bin", "x"} }, "-cni-flags: -bin"},
		{"the command's --parts=", func(o *options) { o.flags["services"] = []string{"--parts=crr"} }, "-services-flags: --parts=crr"},
		{"a part's own -reps", func(o *options) { o.flags["policy"] = []string{"-reps", "2"} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.tweak(&o)
			err := o.validate()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("validate: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("validate: %v, want an error with %q", err, tc.err)
			}
		})
	}
}

func TestSplitList(t *testing.T) {
	got := splitList(" cni, ,policy,")
	if strings.Join(got, "|") != "cni|policy" {
		t.Fatalf("splitList: %q", got)
	}
}
