package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ssmverify/report"
)

// writeRun lays out a run's folder as scripts/gpu.sh leaves it: a go test
// -v log and a report with the diagnoses of its failures.
func writeRun(t *testing.T, log string, diags map[string]string, commit string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mamba2.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := report.NewKernel(report.LibraryInfo{Path: "a copy", Device: "H200"}, &report.BridgeInfo{Describe: map[string]any{"commit": commit}})
	for test, tag := range diags {
		rep.Diagnoses = append(rep.Diagnoses, report.Diagnosis{Test: test, Finding: report.Finding{Tag: tag}})
	}
	js, _ := json.Marshal(rep)
	if err := os.MkdirAll(filepath.Join(dir, "mamba2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mamba2", "report.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const passLog = `=== RUN   TestMamba2Prefill
=== RUN   TestMamba2Prefill/fp32/plain
=== RUN   TestMamba2Prefill/fp32/packed
--- PASS: TestMamba2Prefill (0.10s)
    --- PASS: TestMamba2Prefill/fp32/plain (0.05s)
    --- PASS: TestMamba2Prefill/fp32/packed (0.05s)
=== RUN   TestMamba2ChunkStates
    engines_test.go:107: not declared: chunk_states
--- SKIP: TestMamba2ChunkStates (0.00s)
PASS
`

const failLog = `=== RUN   TestMamba2Prefill
=== RUN   TestMamba2Prefill/fp32/plain
=== RUN   TestMamba2Prefill/fp32/packed
    prefill_test.go:80: prefill b=1 l=300: ratio 90 > 4 at y[0]; diagnosis [varlen:no-reset] packed sequences not separated
--- FAIL: TestMamba2Prefill (0.10s)
    --- PASS: TestMamba2Prefill/fp32/plain (0.05s)
    --- FAIL: TestMamba2Prefill/fp32/packed (0.05s)
=== RUN   TestMamba2ChunkStates
=== RUN   TestMamba2ChunkStates/fp32/rows
--- PASS: TestMamba2ChunkStates (0.01s)
    --- PASS: TestMamba2ChunkStates/fp32/rows (0.01s)
FAIL
`

// TestCrossCopyTable: one cell per copy and leaf case — ok, FAIL with
// the copy's diagnosis of that case, n/s where the copy declares it not,
// "-" where its run has no such case — the cases all copies pass counted,
// the verdict fail, each copy's commit in the summary.
func TestCrossCopyTable(t *testing.T) {
	a := writeRun(t, passLog, nil, "e9594ce")
	b := writeRun(t, failLog, map[string]string{"TestMamba2Prefill/fp32/packed": "varlen:no-reset"}, "7b743ba")
	out := t.TempDir()
	if code := run([]string{"-out", out, "upstream=" + a, "vllm=" + b}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"TestMamba2Prefill/fp32/packed ok FAIL [varlen:no-reset]",
		"TestMamba2ChunkStates n/s (its cases)",
		"TestMamba2ChunkStates/fp32/rows - ok",
		"(1 more cases: ok in every copy)",
		"(commit 7b743ba)",
		"verdict: fail",
	} {
		if !strings.Contains(strings.Join(strings.Fields(string(sum)), " "), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	var rep report.Report
	js, _ := os.ReadFile(filepath.Join(out, "report.json"))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 1 || rep.Tables[0].Name != "mamba2 cross-copy" || len(rep.Bridged) != 2 || rep.Passed {
		t.Errorf("report: tables %v, bridged %d, passed %v", rep.Tables, len(rep.Bridged), rep.Passed)
	}
	if len(rep.Diagnoses) != 1 || rep.Diagnoses[0].Test != "vllm: TestMamba2Prefill/fp32/packed" {
		t.Errorf("diagnoses %+v", rep.Diagnoses)
	}
	if code := run([]string{"-out", out, "upstream"}); code != 2 {
		t.Errorf("an argument without =RUN: exit %d, want 2", code)
	}
}

// TestCrossCopyRunsMerged: a copy named twice is one column, the union of
// its runs (a later run's cell for a case both ran); a run whose report
// was never written still names its failures by the tag its log shows, and
// a case its time limit cut is undecided, not a crash.
func TestCrossCopyRunsMerged(t *testing.T) {
	first := writeRun(t, `=== RUN   TestMamba2SplitResume
=== RUN   TestMamba2SplitResume/fp32/k=1
    consistency_test.go:107: resumed at 1: ratio 68.5 > 4 at y[0]
    consistency_test.go:110: diagnosis of the resumed part against its own reference: [narrow:tf32] TF32 operands
--- FAIL: TestMamba2SplitResume (1.00s)
    --- FAIL: TestMamba2SplitResume/fp32/k=1 (1.00s)
=== RUN   TestMamba2DecodeDrift
=== RUN   TestMamba2DecodeDrift/fp32
panic: test timed out after 8m30s
`, nil, "7b743ba")
	if err := os.Remove(filepath.Join(first, "mamba2", "report.json")); err != nil {
		t.Fatal(err)
	}
	second := writeRun(t, passLog, nil, "7b743ba")
	out := t.TempDir()
	if code := run([]string{"-out", out, "-all", "vllm=" + first, "vllm=" + second}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(sum)), " ")
	for _, want := range []string{
		"case vllm TestMamba2ChunkStates",
		"TestMamba2SplitResume/fp32/k=1 FAIL [narrow:tf32]",
		"TestMamba2DecodeDrift/fp32 undecided [time limit]",
		"TestMamba2Prefill/fp32/packed ok",
		"(commit 7b743ba)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if strings.Count(flat, "vllm ") < 2 || strings.Contains(flat, "vllm vllm") {
		t.Errorf("want one vllm column:\n%s", sum)
	}
}

// TestCrossCopyCheckpointedVerdicts: a run cut inside a test (go test
// holds its subtests' verdicts back for the parent) takes the verdicts of
// the subtests that ended from the report's checkpoint, the diagnosis
// with them; the subtest the cut fell in stays undecided.
func TestCrossCopyCheckpointedVerdicts(t *testing.T) {
	dir := writeRun(t, `=== RUN   TestMamba2DecodeDrift
=== RUN   TestMamba2DecodeDrift/fp32
    drift_test.go:139: 10000 decode steps after a prefill
=== RUN   TestMamba2DecodeDrift/bf16
=== RUN   TestMamba2DecodeDrift/fp16
panic: test timed out after 8m30s
`, map[string]string{"TestMamba2DecodeDrift/fp32": "narrow:tf32"}, "7b743ba")
	path := filepath.Join(dir, "mamba2", "report.json")
	var rep report.Report
	js, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(js, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	rep.Tests = []report.TestVerdict{{Name: "TestMamba2DecodeDrift/fp32", Outcome: report.Failed}, {Name: "TestMamba2DecodeDrift/bf16", Outcome: report.Passed, Passed: true}}
	js, _ = json.Marshal(&rep)
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if code := run([]string{"-out", out, "-all", "vllm=" + dir}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	sum, _ := os.ReadFile(filepath.Join(out, "summary.txt"))
	flat := strings.Join(strings.Fields(string(sum)), " ")
	for _, want := range []string{"TestMamba2DecodeDrift/fp32 FAIL [narrow:tf32]", "TestMamba2DecodeDrift/bf16 ok", "TestMamba2DecodeDrift/fp16 undecided [time limit]"} {
		if !strings.Contains(flat, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}
