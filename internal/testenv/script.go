package testenv

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
)

// RunHiveScripts runs each script in testdata/*.txtar against a hive of
// its own. newHive builds the hive from the script's "#!" arguments and
// returns the commands of the test's own; the hive's script commands
// (hive start, db/show, db/cmp, ...) and the default ones come with them.
// The hive stops when the script ends. Retried commands ("*") give up
// after two minutes.
func RunHiveScripts(t *testing.T, newHive func(t testing.TB, args []string) (*hive.Hive, map[string]script.Cmd)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx, func(t testing.TB, args []string) *script.Engine {
		h, own := newHive(t, args)
		log := hivetest.Logger(t)
		cmds, err := h.ScriptCommands(log)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(cmds, scripttest.DefaultCmds())
		maps.Copy(cmds, own)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = h.Stop(log, ctx) // stopping a hive the script never started fails, harmlessly
		})
		return &script.Engine{Cmds: cmds, Conds: scripttest.DefaultConds(),
			RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 200 * time.Millisecond}
	}, nil, "testdata/*.txtar")
}
