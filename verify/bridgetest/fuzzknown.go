package bridgetest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// A campaign against a kernel with findings already written up (upstream's
// TF32 products, its packed row's missing initial states) would spend its
// time finding them again: every float32 input fails the same way. The
// fuzz targets therefore report a failure through FuzzFailure, which
// counts a failure as known, not as a finding, when SSMK_FUZZ_KNOWN
// describes it.
//
// SSMK_FUZZ_KNOWN is a comma-separated list of entries TAG or
// TAG~TEXT. A failure's diagnosis tag (the "[…]" after "diagnosis" in its
// message) is split at '+' into its causes, each stripped of a leading
// "fwd:" (the backward's forward); the failure is known when every cause
// equals an entry's TAG or ends in ":"+TAG, and, for an entry with TEXT,
// the message holds TEXT. A failure without a diagnosis tag (an isolation
// breach) is never known, and neither is a crash or a missing output. SSMK_FUZZ_KNOWN_LOG, where set, names a
// file each known failure appends one line to (its tag), so that a
// campaign can say how often it met each.
const (
	EnvFuzzKnown    = "SSMK_FUZZ_KNOWN"
	EnvFuzzKnownLog = "SSMK_FUZZ_KNOWN_LOG"
)

// KnownEntry is one entry of SSMK_FUZZ_KNOWN.
type KnownEntry struct {
	Tag  string
	Text string // "" for any message
}

// ParseKnown reads SSMK_FUZZ_KNOWN's value.
func ParseKnown(s string) ([]KnownEntry, error) {
	var es []KnownEntry
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		tag, text, _ := strings.Cut(f, "~")
		tag = strings.TrimSpace(tag)
		if tag == "" || strings.ContainsAny(tag, " []+") {
			return nil, fmt.Errorf("%s entry %q: want TAG or TAG~TEXT with a diagnosis tag such as narrow:tf32 (no spaces, brackets or '+')", EnvFuzzKnown, f)
		}
		if tag == "crash" || tag == "missing" {
			return nil, fmt.Errorf("%s entry %q: a crash or a missing output is always a finding", EnvFuzzKnown, f)
		}
		es = append(es, KnownEntry{Tag: tag, Text: text})
	}
	return es, nil
}

var tagInMessage = regexp.MustCompile(`diagnosis \[([^\]]*)\]`)

// KnownTag is msg's diagnosis tag where every cause in it is one of
// known's; ok false otherwise.
func KnownTag(known []KnownEntry, msg string) (tag string, ok bool) {
	m := tagInMessage.FindStringSubmatch(msg)
	if m == nil || m[1] == "" || len(known) == 0 {
		return "", false
	}
	for _, c := range strings.Split(m[1], "+") {
		c = strings.TrimPrefix(c, "fwd:")
		hit := false
		for _, e := range known {
			if (c == e.Tag || strings.HasSuffix(c, ":"+e.Tag)) && strings.Contains(msg, e.Text) {
				hit = true
				break
			}
		}
		if !hit {
			return "", false
		}
	}
	return m[1], true
}

var (
	knownOnce sync.Once
	knownList []KnownEntry
	knownErr  error
	knownMu   sync.Mutex
)

// knownFromEnv is SSMK_FUZZ_KNOWN's entries, read once.
func knownFromEnv() ([]KnownEntry, error) {
	knownOnce.Do(func() { knownList, knownErr = ParseKnown(os.Getenv(EnvFuzzKnown)) })
	return knownList, knownErr
}

// FuzzFailure reports a fuzz target's failing input: t.Error(msg), or,
// where SSMK_FUZZ_KNOWN describes it, a log line (and a line in
// SSMK_FUZZ_KNOWN_LOG) without failing. A malformed SSMK_FUZZ_KNOWN fails
// every call, naming the entry.
func FuzzFailure(t testing.TB, msg string) {
	t.Helper()
	known, err := countKnown(msg)
	switch {
	case err != nil:
		t.Fatal(err)
	case known:
		t.Logf("known (%s): %s", EnvFuzzKnown, msg)
	default:
		t.Error(msg)
	}
}

// countKnown reports whether SSMK_FUZZ_KNOWN describes the failure msg and,
// where it does, appends its tag to SSMK_FUZZ_KNOWN_LOG's file.
func countKnown(msg string) (bool, error) {
	known, err := knownFromEnv()
	if err != nil {
		return false, err
	}
	tag, ok := KnownTag(known, msg)
	if !ok {
		return false, nil
	}
	path := os.Getenv(EnvFuzzKnownLog)
	if path == "" {
		return true, nil
	}
	knownMu.Lock()
	defer knownMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return true, fmt.Errorf("%s=%s: %v", EnvFuzzKnownLog, path, err)
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, tag)
	return true, err
}
