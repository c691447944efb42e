package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// vkLogger routes virtual-kubelet's logging into the agent's slog logger, so that its
// errors (a pod it could not hand to the runtime, a failed status update) are seen.
type vkLogger struct{ l *slog.Logger }

func (v vkLogger) log(level slog.Level, msg string) { v.l.Log(context.Background(), level, msg) } //nolint:sloglint // virtual-kubelet's messages, passed through

func (v vkLogger) Debug(a ...any)            { v.log(slog.LevelDebug, fmt.Sprint(a...)) }
func (v vkLogger) Debugf(f string, a ...any) { v.log(slog.LevelDebug, fmt.Sprintf(f, a...)) }
func (v vkLogger) Info(a ...any)             { v.log(slog.LevelInfo, fmt.Sprint(a...)) }
func (v vkLogger) Infof(f string, a ...any)  { v.log(slog.LevelInfo, fmt.Sprintf(f, a...)) }
func (v vkLogger) Warn(a ...any)             { v.log(slog.LevelWarn, fmt.Sprint(a...)) }
func (v vkLogger) Warnf(f string, a ...any)  { v.log(slog.LevelWarn, fmt.Sprintf(f, a...)) }
func (v vkLogger) Error(a ...any)            { v.log(slog.LevelError, fmt.Sprint(a...)) }
func (v vkLogger) Errorf(f string, a ...any) { v.log(slog.LevelError, fmt.Sprintf(f, a...)) }
func (v vkLogger) Fatal(a ...any)            { v.Error(a...); os.Exit(1) }
func (v vkLogger) Fatalf(f string, a ...any) { v.Errorf(f, a...); os.Exit(1) }

func (v vkLogger) WithField(k string, val any) vklog.Logger { return vkLogger{v.l.With(k, val)} }
func (v vkLogger) WithError(err error) vklog.Logger         { return vkLogger{v.l.With("error", err)} }

func (v vkLogger) WithFields(f vklog.Fields) vklog.Logger {
	l := v.l
	for k, val := range f {
		l = l.With(k, val)
	}
	return vkLogger{l}
}
