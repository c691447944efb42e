package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/cilium-go/cilium/lab/internal/record"
)

// Down removes everything the lab in stateDir created, newest first, as its record
// says. It works after a crash and is a no-op for a lab that is already gone.
func Down(stateDir string) error {
	l := layout{stateDir}
	entries, err := record.Read(l.record())
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if err := record.Teardown(entries, record.System{}); err != nil {
		return err
	}
	// The record itself lived in the state directory, the first entry undone last.
	if _, err := os.Stat(stateDir); err == nil {
		return fmt.Errorf("%s is still there after teardown", stateDir)
	}
	return nil
}

// ReadStatus reads what the supervisor last reported.
func ReadStatus(stateDir string) (Status, error) {
	var st Status
	b, err := os.ReadFile(layout{stateDir}.status())
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("no supervisor status in %s", stateDir)
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}
