//go:build unix

package simulate

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO is refused before it is opened: opening one blocks until a writer comes.
func TestFIFOIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	for _, path := range []string{fifo, dir} {
		_, err := Load(t.Context(), []string{path}, Options{})
		if err == nil || !strings.Contains(err.Error(), "pipe.yaml: a named pipe (FIFO); only regular files are read") {
			t.Errorf("loading %s: %v, want the FIFO refused", path, err)
		}
	}
}
