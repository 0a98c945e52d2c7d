package bridge

import (
	"os"
	"os/exec"
)

func exec3(py string) error { return exec.Command(py, "-c", "import numpy").Run() }

func requireNumPy() bool { return os.Getenv("SSMK_REQUIRE_NUMPY") != "" }
