package mamba2

import (
	"flag"
	"testing"

	"ssmverify/bridge"
	"ssmverify/report"
	"ssmverify/verify/bridgetest"
)

var (
	kernel    *bridge.SSD
	rep       *report.Report
	spec      bridge.Spec
	suite     *bridgetest.Suite
	reportDir = flag.String("report", "", "write report.json and summary.txt into this folder")
	long      = flag.Bool("long", false, "add the long problems (sequences of 16K and more: 32-bit offsets)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	bridgetest.Main(m, "verify/mamba2", "numpy_ssd", reportDir, func(s *bridgetest.Suite) {
		suite, kernel, rep, spec = s, &bridge.SSD{W: s.W}, s.Rep, s.Spec
		s.Configs = func() map[string]any { return kernel.Configs }
	})
}

func track(t *testing.T) { suite.Track(t) }
