package filters

import (
	"strings"
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// builderCase is a row of a builder's table: a filter and a flow that
// matches it or not, or a bad filter and part of its error.
type builderCase struct {
	name string
	ff   *flow.FlowFilter
	f    *flow.Flow
	want bool
	err  string
}

// testBuilder runs a builder's table; every builder makes nothing of an
// empty filter.
func testBuilder(t *testing.T, b Builder, cases []builderCase) {
	t.Helper()
	if fs, err := b(&flow.FlowFilter{}); len(fs) != 0 || err != nil {
		t.Errorf("an empty filter: %d filters, error %v; want none", len(fs), err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, err := b(c.ff)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) == 0 {
				t.Fatal("no filter built")
			}
			got := true
			for _, m := range fs {
				got = got && m(c.f)
			}
			if got != c.want {
				t.Errorf("matches %v, want %v", got, c.want)
			}
		})
	}
}

// TestEveryFieldHasOneBuilder: a field that no builder read would be
// ignored, and a filter on it would pass every flow.
func TestEveryFieldHasOneBuilder(t *testing.T) {
	fields := (&flow.FlowFilter{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		ff := &flow.FlowFilter{}
		if fd.Name() == "experimental" {
			ff.Experimental = &flow.FlowFilter_Experimental{CelExpression: []string{"true"}}
		} else {
			m := ff.ProtoReflect()
			l := m.Mutable(fd).List()
			l.Append(oneValue(l, fd))
		}
		readers := 0
		for _, b := range builders {
			if fs, err := b(ff); len(fs) > 0 || err != nil {
				readers++
			}
		}
		if readers != 1 {
			t.Errorf("%s is read by %d builders, want 1", fd.Name(), readers)
		}
	}
}

// oneValue is a value of a list field that is not its type's zero.
func oneValue(l protoreflect.List, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(1)
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(1)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.MessageKind:
		return l.NewElement()
	}
	panic("no value for " + fd.FullName())
}
