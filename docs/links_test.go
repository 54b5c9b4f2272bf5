// Package docs holds the user documentation; its test keeps the links in it, and
// in the README, pointing at files that exist.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var link = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

func TestRelativeLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"))
	if len(pages) < 2 {
		t.Fatalf("no pages found: %v", pages)
	}
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
			}
		}
	}
	if checked == 0 {
		t.Error("no relative links checked")
	}
}
