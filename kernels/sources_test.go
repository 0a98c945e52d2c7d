package kernels

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestKernelSourcesReadable holds the kernel sources to the shape a reader
// can follow: no file over 600 lines, no function over 120, and no
// preprocessor switch but include guards, the CUDA compilation passes, the
// planted slowdown of the gate's baseline test (SSMK_SLOW_WORK) and the
// CPU build's engine declaration that make mutants holds the suite to
// (SSMK_CPU_ENGINE): what a
// method does differently is its policy type (src/cuda/scan_policy.cuh), and
// kernel variants live with docs/performance.md, not in the sources.
func TestKernelSourcesReadable(t *testing.T) {
	files, _ := filepath.Glob("src/*.[ch]*")
	more, _ := filepath.Glob("src/cuda/*")
	files = append(append(files, more...), "../cudalib/include/ssmk.h")
	allowed := regexp.MustCompile(`^#\s*(if|ifdef|ifndef|elif)\s+(!?defined\()?(SSMK(_\w+)?_(H|CUH)|__CUDACC__|__CUDA_ARCH__|__cplusplus|_WIN32|__STDC_VERSION__|SSMK_SLOW_WORK|SSMK_CPU_ENGINE)\b`)
	switchLine := regexp.MustCompile(`^#\s*(if|ifdef|ifndef|elif)\b`)
	scope := regexp.MustCompile(`^\s*(template\s*<[^{]*>\s*)?(namespace|extern|struct|union|enum|class)\b`)
	comments := regexp.MustCompile(`//.*$|/\*.*?\*/|"(\\.|[^"\\])*"|'(\\.|[^'\\])*'`)
	for _, f := range files {
		if strings.HasSuffix(f, ".map") {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		type block struct {
			fn    bool
			start int
		}
		var stack []block
		n, inComment, header := 0, false, ""
		for sc.Scan() {
			n++
			line := sc.Text()
			if switchLine.MatchString(line) && !allowed.MatchString(line) {
				t.Errorf("%s:%d: %q: a compile-time switch in a production source", f, n, line)
			}
			// Braces outside comments and literals: a function is a block
			// opened where only namespaces and linkage blocks are open.
			code := comments.ReplaceAllString(line, "")
			if inComment {
				i := strings.Index(code, "*/")
				if i < 0 {
					continue
				}
				code, inComment = code[i+2:], false
			}
			if i := strings.Index(code, "/*"); i >= 0 {
				code, inComment = code[:i], true
			}
			if strings.HasPrefix(strings.TrimSpace(code), "#") {
				continue
			}
			header += " " + code
			for _, c := range code {
				switch c {
				case '{':
					top := true
					for _, b := range stack {
						top = top && !b.fn
					}
					stack = append(stack, block{fn: top && !scope.MatchString(header), start: n})
					header = ""
				case '}':
					if len(stack) > 0 {
						b := stack[len(stack)-1]
						stack = stack[:len(stack)-1]
						if b.fn && n-b.start+1 > 120 {
							t.Errorf("%s:%d: a function of %d lines (over 120)", f, b.start, n-b.start+1)
						}
					}
					header = ""
				case ';':
					header = ""
				}
			}
		}
		fh.Close()
		if n > 600 {
			t.Errorf("%s: %d lines (over 600)", f, n)
		}
	}
}
