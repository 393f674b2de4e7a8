package vyrecuda_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every function of include/vyre_cuda.h is called by the package (a name
// added to the header fails this test until the bindings cover it).
func TestEveryHeaderFunctionIsBound(t *testing.T) {
	include := os.Getenv("VYRE_CUDA_INCLUDE_DIR")
	if include == "" {
		include = filepath.Join("..", "..", "include")
	}
	header, err := os.ReadFile(filepath.Join(include, "vyre_cuda.h"))
	must(t, err, "the header")
	fns := regexp.MustCompile(`VYRE_API\s+[\w\s\*]+?\b(vyre_\w+)\s*\(`).FindAllStringSubmatch(string(header), -1)
	if len(fns) < 40 {
		t.Fatalf("found only %d functions in the header", len(fns))
	}
	var src strings.Builder
	files, _ := filepath.Glob("*.go")
	cfiles, _ := filepath.Glob("*.c")
	for _, f := range append(files, cfiles...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		must(t, err, f)
		src.Write(b)
	}
	text := src.String()
	for _, m := range fns {
		name := m[1]
		if !strings.Contains(text, "C."+name+"(") && !strings.Contains(text, " "+name+"(") {
			t.Errorf("%s is not called by the bindings", name)
		}
	}
}

// Every enumerator of include/vyre_cuda.h (but the *_FORCE32 padding) is
// named by the package: a flag or mode added to the header fails this test
// until the bindings expose it.
func TestEveryHeaderEnumeratorIsBound(t *testing.T) {
	include := os.Getenv("VYRE_CUDA_INCLUDE_DIR")
	if include == "" {
		include = filepath.Join("..", "..", "include")
	}
	header, err := os.ReadFile(filepath.Join(include, "vyre_cuda.h"))
	must(t, err, "the header")
	comments := regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	text := comments.ReplaceAllString(string(header), "")
	bodies := regexp.MustCompile(`(?s)\benum\s*\w*\s*\{(.*?)\}`).FindAllStringSubmatch(text, -1)
	names := map[string]bool{}
	for _, b := range bodies {
		for _, m := range regexp.MustCompile(`\b(VYRE_[A-Z0-9_]+)\s*(?:=|,|$)`).FindAllStringSubmatch(b[1], -1) {
			if !strings.HasSuffix(m[1], "_FORCE32") {
				names[m[1]] = true
			}
		}
	}
	if len(names) < 60 {
		t.Fatalf("found only %d enumerators in the header", len(names))
	}
	var src strings.Builder
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		must(t, err, f)
		src.Write(b)
	}
	bound := src.String()
	for name := range names {
		if !regexp.MustCompile(`\bC\.` + name + `\b`).MatchString(bound) {
			t.Errorf("%s is not named by the bindings (C.%s)", name, name)
		}
	}
}
