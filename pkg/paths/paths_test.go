package paths

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateNamesFlag(t *testing.T) {
	if err := DefaultConfig.Validate(); err != nil {
		t.Fatal(err)
	}
	for flag, tweak := range map[string]func(*Config){
		"--state-dir":   func(c *Config) { c.StateDir = "state" },
		"--socket-path": func(c *Config) { c.SocketPath = "" },
		"--bpf-root":    func(c *Config) { c.BPFRoot = "./bpf" },
	} {
		c := DefaultConfig
		tweak(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), flag+":") {
			t.Errorf("%s: %v", flag, err)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "f.json")
	for _, content := range []string{"one", "two"} {
		if err := WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Fatalf("read %q, want %q", b, content)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}
