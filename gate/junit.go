package gate

import (
	"fmt"
	"os"
	"strings"

	"github.com/jstemmer/go-junit-report/v2/junit"

	"ssmverify/report"
)

// hostname is the report's host name ("" when no host was recorded).
func hostname(r *report.Report) string {
	if r.Host == nil {
		return ""
	}
	return r.Host.Hostname
}

// WriteJUnit writes the report's tests as JUnit XML, one testsuite per
// package (and task), with failures carrying their log and the command
// that reproduces them, and the library's identity as properties.
func WriteJUnit(path string, r *report.Report) error {
	suites := junit.Testsuites{Name: "ssmverify gate"}
	index := map[string]int{}
	for _, t := range r.Tests {
		key := t.Package
		if t.Task != "" && len(r.Tasks) > 1 {
			key = t.Task + "/" + t.Package
		}
		i, ok := index[key]
		if !ok {
			ts := junit.Testsuite{Name: "ssmverify/" + key, Package: "ssmverify/" + t.Package, Timestamp: r.Started, Hostname: hostname(r)}
			ts.AddProperty("library", r.Library.Path)
			ts.AddProperty("library.sha256", r.Library.SHA256)
			ts.AddProperty("backend", r.Library.Backend)
			ts.AddProperty("device", r.Library.Device)
			suites.AddSuite(ts)
			i = len(suites.Suites) - 1
			index[key] = i
		}
		tc := junit.Testcase{Name: t.Name, Classname: "ssmverify/" + t.Package, Time: fmt.Sprintf("%.3f", t.Seconds)}
		switch t.Outcome {
		case report.Failed:
			msg := t.Reason
			if msg == "" {
				msg = "failed"
			}
			tc.Failure = &junit.Result{Message: msg, Data: strings.Join(append(t.Output, "reproduce: "+t.Reproduce), "\n")}
		case report.Skipped:
			tc.Skipped = &junit.Result{Message: "skipped"}
		case report.Undecided:
			tc.Skipped = &junit.Result{Message: "undecided: " + t.Reason}
		}
		suites.Suites[i].AddTestcase(tc)
	}
	// Setup errors and performance regressions are failures a CI test tab
	// must show too.
	if len(r.Errors) > 0 || len(r.Performance) > 0 {
		ts := junit.Testsuite{Name: "ssmverify/gate", Package: "ssmverify/gate", Timestamp: r.Started}
		for _, e := range r.Errors {
			ts.AddTestcase(junit.Testcase{Name: "setup", Classname: "ssmverify/gate", Error: &junit.Result{Message: e}})
		}
		for _, p := range r.Performance {
			tc := junit.Testcase{Name: "performance/" + p.Method, Classname: "ssmverify/gate"}
			switch p.Verdict {
			case report.Regression:
				tc.Failure = &junit.Result{Message: p.Reason}
			case report.VerdictUndecided:
				tc.Error = &junit.Result{Message: "could not decide: " + p.Reason}
			}
			ts.AddTestcase(tc)
		}
		suites.AddSuite(ts)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := suites.WriteXML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
