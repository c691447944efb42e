package filters

import (
	"fmt"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// celVariable is the flow's name in an expression, Hubble's: "flow" is
// the proto package's, so `_flow.verdict == Verdict.DROPPED`.
const celVariable = "_flow"

// The limits of expressions, which any Hubble client may send: how many
// a filter has, an expression's size when parsed, and the cost of evaluating it on one flow (cel-go's
// units, about one per field access or comparison), so that no filter
// makes the server loop over a flow's lists for long.
const (
	celMaxExpressions    = 64
	celMaxExpressionSize = 4096
	celMaxCost           = 10_000
)

var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(cel.Container("flow"), cel.Types(&flow.Flow{}),
		cel.Variable(celVariable, cel.ObjectType("flow.Flow")),
		cel.ParserExpressionSizeLimit(celMaxExpressionSize))
	if err != nil {
		panic(fmt.Sprintf("CEL environment of flows: %v", err))
	}
	return env
}()

// celFilter: experimental.cel_expression.
func celFilter(ff *flow.FlowFilter) ([]Func, error) {
	return when(ff.GetExperimental().GetCelExpression(), celExpressions)
}

// celExpressions matches a flow when one of the boolean expressions
// holds for it; an expression that fails on a flow (or costs more than
// the limit) does not hold.
func celExpressions(exprs []string) (Func, error) {
	if len(exprs) > celMaxExpressions {
		return nil, fmt.Errorf("cel_expression: %d expressions, at most %d", len(exprs), celMaxExpressions)
	}
	var prgs []cel.Program
	for _, e := range exprs {
		ast, iss := celEnv.Compile(e)
		if iss.Err() != nil {
			return nil, fmt.Errorf("cel_expression %q: %w", e, iss.Err())
		}
		if ast.OutputType() != cel.BoolType {
			return nil, fmt.Errorf("cel_expression %q: of type %s, want bool", e, ast.OutputType())
		}
		prg, err := celEnv.Program(ast, cel.CostLimit(celMaxCost))
		if err != nil {
			return nil, fmt.Errorf("cel_expression %q: %w", e, err)
		}
		prgs = append(prgs, prg)
	}
	return func(f *flow.Flow) bool {
		for _, prg := range prgs {
			out, _, err := prg.Eval(map[string]any{celVariable: f})
			if err == nil && out == types.True {
				return true
			}
		}
		return false
	}, nil
}
