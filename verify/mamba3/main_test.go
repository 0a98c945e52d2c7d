// Package mamba3 is the verification suite of Mamba-3's SISO kernels —
// upstream's mamba3_siso_combined (forward) and mamba3_siso_step — reached
// through the bridge, against package mamba3's float64 reference of the
// exponential-trapezoidal layer and its error model (go test
// ./verify/mamba3; SSMK_BRIDGE names the kernel, by default the suite's
// numpy path).
package mamba3

import (
	"flag"
	"testing"

	"ssmverify/bridge"
	"ssmverify/report"
	"ssmverify/verify/bridgetest"
)

var (
	kernel    *bridge.Mamba3
	rep       *report.Report
	spec      bridge.Spec
	suite     *bridgetest.Suite
	reportDir = flag.String("report", "", "write report.json and summary.txt into this folder")
)

func TestMain(m *testing.M) {
	flag.Parse()
	bridgetest.Main(m, "verify/mamba3", "numpy_mamba3", reportDir, func(s *bridgetest.Suite) {
		suite, kernel, rep, spec = s, &bridge.Mamba3{W: s.W}, s.Rep, s.Spec
		s.Configs = func() map[string]any { return kernel.Configs }
	})
}

func track(t *testing.T) { suite.Track(t) }

// repFor is the report a check of k writes to (Suite.ReportFor): the
// run's for the kernel under test, else a scratch report.
func repFor(k *bridge.Mamba3) *report.Report { return suite.ReportFor(k.W) }
