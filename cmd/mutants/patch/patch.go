// Package patch applies the unified diffs of make mutants' planted bugs to
// a copy of the kernel sources. A mutant lives in its patch, never in the
// shipped sources: the library a user builds has no trace of it.
//
// Application is exact: each hunk's old lines (context and removals) must
// stand in the file as one block, once, or the patch fails to apply and
// says where; there is no fuzz factor, so that a patch that no longer fits
// the sources is a failing test (TestPatchesApply), not a bug silently
// planted in another place.
package patch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// File is one file's hunks.
type File struct {
	Path  string // relative to the tree's root (a/ and b/ stripped)
	Hunks []Hunk
}

// Hunk is a block of old lines replaced by new ones.
type Hunk struct {
	Line     int // the old start line the diff names (1-based), for messages
	Old, New []string
}

// Parse reads a unified diff (diff -u, git diff): one or more files, each
// with its hunks.
func Parse(diff string) ([]File, error) {
	var files []File
	lines := strings.Split(diff, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "--- "):
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "+++ ") {
				return nil, fmt.Errorf("line %d: '---' without '+++'", i+1)
			}
			p := strings.Fields(strings.TrimPrefix(lines[i+1], "+++ "))[0]
			files = append(files, File{Path: strings.TrimPrefix(p, "b/")})
			i++
		case strings.HasPrefix(l, "@@ "):
			if len(files) == 0 {
				return nil, fmt.Errorf("line %d: a hunk before any file", i+1)
			}
			var h Hunk
			var oldN, newN int
			if _, err := fmt.Sscanf(l, "@@ -%d,%d +", &h.Line, &oldN); err != nil {
				if _, err := fmt.Sscanf(l, "@@ -%d +", &h.Line); err != nil {
					return nil, fmt.Errorf("line %d: hunk header %q", i+1, l)
				}
				oldN = 1
			}
			head := strings.Fields(l)
			if len(head) < 3 {
				return nil, fmt.Errorf("line %d: hunk header %q", i+1, l)
			}
			newN = 1
			if _, n, ok := strings.Cut(head[2], ","); ok {
				fmt.Sscanf(n, "%d", &newN)
			}
			for i+1 < len(lines) && (len(h.Old) < oldN || len(h.New) < newN) {
				i++
				b := lines[i]
				switch {
				case strings.HasPrefix(b, " "):
					h.Old, h.New = append(h.Old, b[1:]), append(h.New, b[1:])
				case b == "":
					h.Old, h.New = append(h.Old, ""), append(h.New, "")
				case strings.HasPrefix(b, "-"):
					h.Old = append(h.Old, b[1:])
				case strings.HasPrefix(b, "+"):
					h.New = append(h.New, b[1:])
				case strings.HasPrefix(b, `\`):
				default:
					return nil, fmt.Errorf("line %d: %q in a hunk", i+1, b)
				}
			}
			if len(h.Old) != oldN || len(h.New) != newN {
				return nil, fmt.Errorf("line %d: hunk of %d old and %d new lines, its header says %d and %d", i+1, len(h.Old), len(h.New), oldN, newN)
			}
			f := &files[len(files)-1]
			f.Hunks = append(f.Hunks, h)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no file in the diff")
	}
	return files, nil
}

// Apply applies the hunks to text, in order.
func (f File) Apply(text string) (string, error) {
	lines := strings.Split(text, "\n")
	for _, h := range f.Hunks {
		at := -1
		for i := 0; i+len(h.Old) <= len(lines); i++ {
			if equal(lines[i:i+len(h.Old)], h.Old) {
				if at >= 0 {
					return "", fmt.Errorf("%s: the hunk at line %d matches at lines %d and %d: ambiguous", f.Path, h.Line, at+1, i+1)
				}
				at = i
			}
		}
		if at < 0 {
			return "", fmt.Errorf("%s: the hunk at line %d does not match the file (the sources changed: regenerate the patch)", f.Path, h.Line)
		}
		lines = append(lines[:at], append(append([]string{}, h.New...), lines[at+len(h.Old):]...)...)
	}
	return strings.Join(lines, "\n"), nil
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Tree copies the folder dir of root into dst/dir (dir: "cudalib"), less
// its Go files (the copy is sources to compile, and a Go package under the
// module's build folder would join go test ./...), and applies diff to the
// copy.
func Tree(root, dir, dst, diff string) error {
	files, err := Parse(diff)
	if err != nil {
		return err
	}
	if err := Copy(root, dir, dst); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dst, f.Path)
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("the patch names %s: %w", f.Path, err)
		}
		out, err := f.Apply(string(b))
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Copy copies the folder dir of root into dst/dir, less its Go files,
// replacing what was there.
func Copy(root, dir, dst string) error {
	if err := os.RemoveAll(filepath.Join(dst, dir)); err != nil {
		return err
	}
	return copyDir(filepath.Join(root, dir), filepath.Join(dst, dir))
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
}
