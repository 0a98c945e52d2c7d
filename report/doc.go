// Package report declares the verification suite's results once, as types:
// what the suite writes and what the gate, the Slurm merge and a user's own
// tooling read back.
//
//	report.json   Report: the library under test, one Cell per method × dtype ×
//	              real/complex A (comparisons, failures, largest scaled error
//	              ratio and ulp distance, every ratio), every test's verdict,
//	              the suite's tables, and the convergence measurement
//	check7.json   Check7: every method's timing against zoh on the same inputs,
//	              with its samples, the copy bandwidth and the bytes moved
//
// make bench runs Check7 once per library, size, input type and A into
// folders named SIZE-DTYPE-COMPLEX-LIBRARY; LoadBench reads them back,
// WriteBenchTable prints its table and BenchTargets judges the speed targets
// the runs can show (every backward within Check7's bound of zoh's, zoh
// against Mamba's kernel, 16-bit inputs against fp32).
//
// Ratios are the dimensionless scaled error ratio of package judge; ulps are in
// the kernel's dtype. Num encodes the ±Inf and NaN a broken kernel produces as
// the strings "inf", "-inf" and "nan", so that a report of a failure still
// decodes.
package report
