package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"replab/internal/faultkind"
)

// TestDocsCoverTheVocabulary keeps docs/spec.md in step with the code: every
// key, every preset and every kind of fault is documented.
func TestDocsCoverTheVocabulary(t *testing.T) {
	data, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	var words []string
	words = append(words, labKeys...)
	words = append(words, siteKeys...)
	words = append(words, linkOnlyKeys...)
	words = append(words, dirKeyNames()...)
	words = append(words, presetNames()...)
	words = append(words, faultKeys...)
	for _, on := range []string{faultkind.OnLink, faultkind.OnNode, faultkind.OnSite} {
		words = append(words, faultkind.Default().Names(on)...)
	}
	words = append(words, storageKeys...)
	words = append(words, StorageKinds...)
	words = append(words, targetKeys...)
	words = append(words, targetNodeKeys...)
	for _, w := range words {
		if !strings.Contains(doc, "`"+w+"`") {
			t.Errorf("docs/spec.md does not mention `%s`", w)
		}
	}
}

// TestDocsExamplesParse parses every ```toml block of docs/spec.md; blocks
// without [lab] get a lab and the sites they mention.
func TestDocsExamplesParse(t *testing.T) {
	data, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(data), "```toml\n")[1:]
	if len(blocks) < 5 {
		t.Fatalf("only %d toml blocks", len(blocks))
	}
	trace := []byte("0\n1\n2\n3\n")
	for i, b := range blocks {
		b = b[:strings.Index(b, "```")]
		if !strings.Contains(b, "[lab]") {
			b = "[lab]\nname = \"docs\"\n" + b
			for _, s := range []string{"primary", "dr", "hq", "ship", "eu"} {
				if !strings.Contains(b, "[site."+s+"]") {
					b += "\n[site." + s + "]\n"
				}
			}
		}
		e := &env{baseDir: ".", readFile: func(string) ([]byte, error) { return trace, nil }}
		if _, err := parse("docs.toml", []byte(b), e); err != nil {
			t.Errorf("block %d:\n%s\n%v", i+1, b, err)
		}
	}
}

// docSpec is a ```toml block of README.md or docs/*.md that is a whole
// spec: it has [lab] or [target].
type docSpec struct {
	Name string // "../../docs/workloads.md:412": the file and the block's first line
	Text string
}

var wholeSpecRE = regexp.MustCompile(`(?m)^\[(lab|target)\]`)

// docSpecs finds every whole spec in README.md and docs/*.md (dir is the
// repository's root).
func docSpecs(t *testing.T, dir string) []docSpec {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []docSpec
	for _, f := range append([]string{filepath.Join(dir, "README.md")}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for at := 0; ; {
			i := strings.Index(text[at:], "```toml\n")
			if i < 0 {
				break
			}
			start := at + i + len("```toml\n")
			end := strings.Index(text[start:], "```")
			if end < 0 {
				t.Fatalf("%s: a ```toml block that does not end", f)
			}
			block := text[start : start+end]
			if wholeSpecRE.MatchString(block) {
				line := strings.Count(text[:start], "\n") + 1
				out = append(out, docSpec{Name: fmt.Sprintf("%s:%d", f, line), Text: block})
			}
			at = start + end + 3
		}
	}
	return out
}

// TestDocsSpecsParse: every whole spec in the README and docs/ parses
// (cmd/replab's TestDocsSpecsValidate also checks each with its engine
// and workload).
func TestDocsSpecsParse(t *testing.T) {
	specs := docSpecs(t, "../..")
	if len(specs) < 8 {
		t.Fatalf("found %d whole specs in the docs, want at least 8", len(specs))
	}
	for _, d := range specs {
		if _, err := Parse(d.Name, []byte(d.Text)); err != nil {
			t.Errorf("%s:\n%v", d.Name, err)
		}
	}
}
