package patch

import (
	"strings"
	"testing"
)

const diff = `--- a/x.c
+++ b/x.c
@@ -2,3 +2,3 @@
 int a;
-int b = 1;
+int b = 2;
 int c;
`

// TestApply: a hunk replaces its block; one that does not match, or matches
// twice, is refused with the file and line.
func TestApply(t *testing.T) {
	files, err := Parse(diff)
	if err != nil || len(files) != 1 || files[0].Path != "x.c" || len(files[0].Hunks) != 1 {
		t.Fatalf("Parse: %+v, %v", files, err)
	}
	got, err := files[0].Apply("int z;\nint a;\nint b = 1;\nint c;\n")
	if err != nil || got != "int z;\nint a;\nint b = 2;\nint c;\n" {
		t.Fatalf("Apply = %q, %v", got, err)
	}
	if _, err := files[0].Apply("int a;\nint b = 3;\nint c;\n"); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a changed file: %v, want a refusal", err)
	}
	twice := "int a;\nint b = 1;\nint c;\nint a;\nint b = 1;\nint c;\n"
	if _, err := files[0].Apply(twice); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("two matches: %v, want a refusal", err)
	}
	if _, err := Parse("not a diff"); err == nil {
		t.Error("a text without a diff parsed")
	}
}
