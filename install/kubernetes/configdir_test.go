package kubernetes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func testFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("routing-mode", "tunnel", "")
	fs.Int("tunnel-port", 8472, "")
	fs.Bool("enable-ipv4-masquerade", true, "")
	fs.StringSlice("cluster-pool-ipv4-cidr", []string{"10.0.0.0/8"}, "")
	fs.String(ConfigDirFlag, "", "")
	return fs
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestApplyConfigDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		files   map[string]string
		want    map[string]string // flag -> value after
		wantErr string
	}{{
		name: "files set flags, trailing newline dropped",
		files: map[string]string{"routing-mode": "native\n", "tunnel-port": "9000",
			"enable-ipv4-masquerade": "false\n", "cluster-pool-ipv4-cidr": "10.1.0.0/16,10.2.0.0/16"},
		want: map[string]string{"routing-mode": "native", "tunnel-port": "9000",
			"enable-ipv4-masquerade": "false", "cluster-pool-ipv4-cidr": "[10.1.0.0/16,10.2.0.0/16]"},
	}, {
		name:  "command line wins",
		args:  []string{"--routing-mode=tunnel", "--cluster-pool-ipv4-cidr=10.9.0.0/16"},
		files: map[string]string{"routing-mode": "native", "cluster-pool-ipv4-cidr": "10.1.0.0/16", "tunnel-port": "1"},
		want:  map[string]string{"routing-mode": "tunnel", "cluster-pool-ipv4-cidr": "[10.9.0.0/16]", "tunnel-port": "1"},
	}, {
		name:  "no files, defaults stay",
		files: map[string]string{},
		want:  map[string]string{"routing-mode": "tunnel", "tunnel-port": "8472"},
	}, {
		name:    "misspelt key is named",
		files:   map[string]string{"routing-mode": "native", "tunnel-prot": "1"},
		wantErr: "tunnel-prot names no flag",
	}, {
		name:    "bad value names the flag",
		files:   map[string]string{"tunnel-port": "many"},
		wantErr: "tunnel-port",
	}, {
		name:    "the directory cannot name itself",
		files:   map[string]string{ConfigDirFlag: "/elsewhere"},
		wantErr: "config-dir names no flag",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			fs := testFlags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := ApplyConfigDir(fs, dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestApplyConfigDirWithoutDirectory(t *testing.T) {
	fs := testFlags()
	if err := ApplyConfigDir(fs, ""); err != nil {
		t.Fatalf("empty --config-dir: %v", err)
	}
	err := ApplyConfigDir(fs, filepath.Join(t.TempDir(), "absent"))
	if err == nil || !strings.Contains(err.Error(), "--config-dir") {
		t.Fatalf("absent directory: %v", err)
	}
}

// TestApplyConfigDirReadsMountedConfigMap lays the directory out as the
// kubelet mounts a ConfigMap: the data in a timestamped dot directory, a
// ..data symlink to it and one symlink per key.
func TestApplyConfigDirReadsMountedConfigMap(t *testing.T) {
	dir := t.TempDir()
	version := filepath.Join(dir, "..2026_11_30_02_00_00.123456789")
	if err := os.Mkdir(version, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, version, map[string]string{"routing-mode": "native", "tunnel-port": "4789"})
	if err := os.Symlink(filepath.Base(version), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"routing-mode", "tunnel-port"} {
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
	}
	fs := testFlags()
	if err := ApplyConfigDir(fs, dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"routing-mode": "native", "tunnel-port": "4789"} {
		if got := fs.Lookup(name).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
}
