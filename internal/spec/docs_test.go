package spec

import (
	"os"
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
