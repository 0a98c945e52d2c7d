//go:build !linux

package bridgetest

// logStderr does nothing off Linux (SSMK_STDERR_LOG is Linux's).
func logStderr() {}
