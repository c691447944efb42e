package depcheck

import (
	"strings"
	"testing"
)

// linter is what `make lint` runs, pinned by hack/tools/go.mod.
const linter = "github.com/golangci/golangci-lint/v2"

// TestLinterStaysApart: golangci-lint is pinned in hack/tools, a module of
// its own, and none of its module graph (analyzers, their test helpers)
// enters cilium-go's go.mod.
func TestLinterStaysApart(t *testing.T) {
	tools := readGoMod(t, "../tools/go.mod")
	if len(tools.Tool) != 1 || tools.Tool[0].Path != linter+"/cmd/golangci-lint" {
		t.Errorf("hack/tools' tool is %v, want %s/cmd/golangci-lint", tools.Tool, linter)
	}
	root := readGoMod(t, "../../go.mod")
	for _, r := range root.Require {
		if strings.HasPrefix(r.Path, "github.com/golangci/") {
			t.Errorf("go.mod requires %s", r.Path)
		}
	}
	for _, tool := range root.Tool {
		if strings.HasPrefix(tool.Path, "github.com/golangci/") {
			t.Errorf("go.mod has the tool %s", tool.Path)
		}
	}
}
