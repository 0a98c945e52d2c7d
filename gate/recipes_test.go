package gate

import (
	"ssmverify/report"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"ssmverify/ssm"

	yaml "go.yaml.in/yaml/v3"
)

// shellWords splits a command line the way the shell would for the
// commands the Slurm script prints (words, 'single-quoted' words).
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	inQ, have := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			inQ, have = !inQ, true
		case r == ' ' && !inQ:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

func dryRun(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"../docs/slurm/gate-array.sbatch"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"DRY_RUN=1", "OUT_ROOT=/scratch/gate", "SLURM_SUBMIT_DIR="}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSlurmArrayDryRun: the array script's commands, as its dry-run mode
// prints them: one per array index, distinct task names and output
// folders, valid -pkgs and -run patterns, every test of the verify suite
// in some task, the binding's design tests in one, the bridged suites in
// one, Check7 for every method, and a merge over every task's report.
func TestSlurmArrayDryRun(t *testing.T) {
	list, err := dryRun(t, nil, "--list")
	if err != nil {
		t.Fatalf("--list: %v\n%s", err, list)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	script, _ := os.ReadFile("../docs/slurm/gate-array.sbatch")
	if m := regexp.MustCompile(`#SBATCH --array=0-(\d+)`).FindStringSubmatch(string(script)); m == nil || m[1] != itoa(len(lines)-1) {
		t.Errorf("#SBATCH --array %v does not match the %d tasks", m, len(lines))
	}
	src, _ := filepath.Glob("../verify/*_test.go")
	var verifyTests []string
	for _, f := range src {
		b, _ := os.ReadFile(f)
		for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`).FindAllStringSubmatch(string(b), -1) {
			verifyTests = append(verifyTests, m[1])
		}
	}
	covered := map[string]bool{}
	methods := map[string]bool{}
	tasks, outs := map[string]bool{}, map[string]bool{}
	designs := false // some task runs the binding's design tests
	bridgedSuites := map[string]bool{}
	for i, line := range lines {
		w := shellWords(line)
		flags := map[string]string{}
		for k := 0; k < len(w); k++ {
			if strings.HasPrefix(w[k], "-") && k+1 < len(w) {
				flags[w[k]] = w[k+1]
				k++
			}
		}
		if tasks[flags["-task"]] || outs[flags["-out"]] || !strings.HasPrefix(flags["-out"], "/scratch/gate/") {
			t.Errorf("task %d: -task %q -out %q not distinct or not under OUT_ROOT", i, flags["-task"], flags["-out"])
		}
		tasks[flags["-task"]], outs[flags["-out"]] = true, true
		for _, p := range strings.Split(flags["-pkgs"], ",") {
			if p != "golden" && p != "fuzz" && p != "verify" && p != "kernels" && p != "mamba2" && p != "mamba3" {
				t.Errorf("task %d: -pkgs %q", i, flags["-pkgs"])
			}
			designs = designs || p == "kernels"
			bridgedSuites[p] = bridgedSuites[p] || p == "mamba2" || p == "mamba3"
		}
		re, err := regexp.Compile(flags["-run"])
		if err != nil {
			t.Errorf("task %d: -run %q: %v", i, flags["-run"], err)
			continue
		}
		for _, name := range verifyTests {
			if re.MatchString(name) {
				covered[name] = true
			}
		}
		if m := regexp.MustCompile(`-methods (\w+)`).FindStringSubmatch(flags["-verify-args"]); m != nil {
			methods[m[1]] = true
		}
		one, err := dryRun(t, []string{"SLURM_ARRAY_TASK_ID=" + itoa(i)})
		if err != nil || strings.TrimSpace(one) != line {
			t.Errorf("array index %d prints %q (err %v), want %q", i, one, err, line)
		}
	}
	for _, name := range verifyTests {
		if !covered[name] {
			t.Errorf("no task runs verify's %s", name)
		}
	}
	for _, m := range ssm.Methods() {
		if !methods[m.String()] {
			t.Errorf("no Check7 task for %v", m)
		}
	}
	if !designs {
		t.Error("no task runs the binding's design tests (-pkgs …,kernels)")
	}
	if !bridgedSuites["mamba2"] || !bridgedSuites["mamba3"] {
		t.Errorf("no task runs the bridged suites (-pkgs mamba2,mamba3): %v", bridgedSuites)
	}
	if out, err := dryRun(t, []string{"SLURM_ARRAY_TASK_ID=" + itoa(len(lines))}); err == nil || !strings.Contains(out, "raise --array") {
		t.Errorf("an index past the tasks: %q, %v; want exit 2 with advice", out, err)
	}
	merge, err := dryRun(t, nil, "--merge")
	if err != nil || !strings.Contains(merge, "merge -out /scratch/gate/merged /scratch/gate/*/report.json") {
		t.Errorf("--merge prints %q (%v)", merge, err)
	}
	sub := exec.Command("bash", "../docs/slurm/submit.sh")
	sub.Env = append(os.Environ(), "DRY_RUN=1")
	if out, err := sub.CombinedOutput(); err != nil || !strings.Contains(string(out), "--dependency=afterany:") {
		t.Errorf("submit.sh dry run: %q, %v", out, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestCIRecipes: the GitHub Actions workflow and the GitLab job parse as
// YAML, run the gate on a GPU runner, and publish junit.xml and report.md.
func TestCIRecipes(t *testing.T) {
	var gh struct {
		Jobs map[string]struct {
			RunsOn []string `yaml:"runs-on"`
			Steps  []struct {
				Uses string            `yaml:"uses"`
				Run  string            `yaml:"run"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	b, err := os.ReadFile("../docs/ci/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &gh); err != nil {
		t.Fatalf("github-actions.yml: %v", err)
	}
	job := gh.Jobs["gate"]
	var runsGate, junit, comment, goCache bool
	for _, s := range job.Steps {
		runsGate = runsGate || strings.Contains(s.Run, "build/gate -out")
		junit = junit || strings.HasSuffix(s.With["report_paths"], "junit.xml")
		comment = comment || strings.HasSuffix(s.With["path"], "report.md")
		goCache = goCache || (strings.HasPrefix(s.Uses, "actions/setup-go") && s.With["cache-dependency-path"] != "")
	}
	if !strings.Contains(strings.Join(job.RunsOn, ","), "gpu") || !runsGate || !junit || !comment || !goCache {
		t.Errorf("github-actions.yml: runs-on %v, make gate %t, junit %t, PR comment %t, Go cache %t", job.RunsOn, runsGate, junit, comment, goCache)
	}
	// the recipe for a repository of Triton kernels: the bridged suites
	// alone, against the kernel SSMK_BRIDGE names
	var tr struct {
		Jobs map[string]struct {
			RunsOn []string `yaml:"runs-on"`
			Steps  []struct {
				Run  string            `yaml:"run"`
				Env  map[string]string `yaml:"env"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	b, err = os.ReadFile("../docs/ci/github-actions-triton.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &tr); err != nil {
		t.Fatalf("github-actions-triton.yml: %v", err)
	}
	var bridgedGate, tjunit, tcomment bool
	for _, s := range tr.Jobs["gate"].Steps {
		bridgedGate = bridgedGate || (strings.Contains(s.Run, "build/gate -out out/gate -pkgs mamba2,mamba3") && s.Env["SSMK_BRIDGE"] != "")
		tjunit = tjunit || strings.HasSuffix(s.With["report_paths"], "junit.xml")
		tcomment = tcomment || strings.HasSuffix(s.With["path"], "report.md")
	}
	if !strings.Contains(strings.Join(tr.Jobs["gate"].RunsOn, ","), "gpu") || !bridgedGate || !tjunit || !tcomment {
		t.Errorf("github-actions-triton.yml: runs-on %v, bridged gate with SSMK_BRIDGE %t, junit %t, PR comment %t", tr.Jobs["gate"].RunsOn, bridgedGate, tjunit, tcomment)
	}
	var gl map[string]struct {
		Tags   []string `yaml:"tags"`
		Script []string `yaml:"script"`
		Cache  []struct {
			Paths []string `yaml:"paths"`
		} `yaml:"cache"`
		AllowFailure struct {
			ExitCodes []int `yaml:"exit_codes"`
		} `yaml:"allow_failure"`
		Artifacts struct {
			Reports struct {
				JUnit string `yaml:"junit"`
			} `yaml:"reports"`
		} `yaml:"artifacts"`
	}
	b, err = os.ReadFile("../docs/ci/gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &gl); err != nil {
		t.Fatalf("gitlab-ci.yml: %v", err)
	}
	g := gl["kernel-gate"]
	caches := ""
	for _, c := range g.Cache {
		caches += strings.Join(c.Paths, ",") + ","
	}
	if !strings.Contains(strings.Join(g.Tags, ","), "gpu") || !strings.Contains(strings.Join(g.Script, "\n"), "build/gate -out") ||
		!strings.HasSuffix(g.Artifacts.Reports.JUnit, "junit.xml") || len(g.AllowFailure.ExitCodes) != 1 || g.AllowFailure.ExitCodes[0] != report.ExitUndecided ||
		!strings.Contains(caches, "go-build") || !strings.Contains(caches, "build") {
		t.Errorf("gitlab-ci.yml kernel-gate: %+v", g)
	}
}
