package mamba2

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/report"
	"ssmverify/testrun"
)

var (
	kernel    *bridge.SSD
	rep       *report.Report
	spec      bridge.Spec
	reportDir = flag.String("report", "", "write report.json and summary.txt into this folder")
	long      = flag.Bool("long", false, "add the long problems (sequences of 16K and more: 32-bit offsets)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	s, ok, err := bridge.SpecFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mamba2:", err)
		os.Exit(2)
	}
	if !ok {
		s = bridge.Spec{Adapter: "numpy_ssd"}
	}
	spec = s
	w, err := bridge.Start(s)
	if err != nil {
		if !ok && os.Getenv("SSMK_REQUIRE_NUMPY") == "" {
			fmt.Println("mamba2: no worker could start (python3 with NumPy; Debian: apt-get install python3-numpy): skipped:", firstLine(err))
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "mamba2: starting the worker:", err)
		os.Exit(2)
	}
	kernel = &bridge.SSD{W: w}
	h := w.Hello()
	info := &report.BridgeInfo{Adapter: strings.TrimSpace(s.Adapter + " " + strings.Join(s.Args, " ")), Describe: h.Describe}
	dev, _ := h.Describe["device"].(string)
	name, _ := h.Describe["kernel"].(string)
	rep = report.NewKernel(report.LibraryInfo{Path: name, Backend: "bridge", Device: dev, Selection: "SSMK_BRIDGE=" + info.Adapter}, info)
	fmt.Printf("mamba2: judging %s through the bridge (%s) on %s\n", name, info.Adapter, dev)
	out := testrun.CaptureStdout()
	code := m.Run()
	if tests, err := testrun.Parse(out(), "verify/mamba2", testrun.ErrorSites(".")); err == nil {
		rep.SetReasons(tests)
	}
	info.Configs, info.Restarts, info.Crashes = kernel.Configs, w.Restarts, w.Crashes
	w.Close()
	rep.Finish()
	if *reportDir != "" {
		if err := rep.Write(*reportDir); err != nil {
			fmt.Fprintln(os.Stderr, "mamba2: writing the report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// track records a test's outcome in the report when it ends.
func track(t *testing.T) {
	t.Cleanup(func() {
		o := report.Passed
		switch {
		case t.Failed():
			o = report.Failed
		case t.Skipped() && rep.IsUndecided(t.Name()):
			o = report.Undecided
		case t.Skipped():
			o = report.Skipped
		}
		rep.RecordTest(t.Name(), o)
	})
}
