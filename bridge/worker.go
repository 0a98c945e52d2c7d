package bridge

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Spec says how to start a worker: the Python to run, the adapter (a name
// in bridge/python/adapters or a path to a .py file) and its key=value
// arguments, where bridge/python is, and how long one call may take.
type Spec struct {
	Python  string
	Adapter string
	Args    []string
	Dir     string // bridge/python; found from the working directory when empty
	Timeout time.Duration
	Env     []string
}

// SpecFromEnv reads a Spec from SSMK_BRIDGE ("ADAPTER [key=value …]"),
// SSMK_PYTHON (FindPython), SSMK_BRIDGE_DIR and SSMK_BRIDGE_TIMEOUT
// (seconds, default 600: a first call compiles and autotunes). ok is
// false when SSMK_BRIDGE is unset.
func SpecFromEnv() (Spec, bool, error) {
	v := strings.Fields(os.Getenv("SSMK_BRIDGE"))
	if len(v) == 0 {
		return Spec{}, false, nil
	}
	s := Spec{Adapter: v[0], Args: v[1:], Dir: os.Getenv("SSMK_BRIDGE_DIR"), Timeout: 600 * time.Second}
	if t := os.Getenv("SSMK_BRIDGE_TIMEOUT"); t != "" {
		sec, err := strconv.ParseFloat(t, 64)
		if err != nil || sec <= 0 {
			return s, true, fmt.Errorf("bridge: SSMK_BRIDGE_TIMEOUT = %q, want seconds > 0", t)
		}
		s.Timeout = time.Duration(sec * float64(time.Second))
	}
	for _, a := range s.Args {
		if !strings.Contains(a, "=") {
			return s, true, fmt.Errorf("bridge: SSMK_BRIDGE argument %q, want key=value after the adapter", a)
		}
	}
	if strings.HasSuffix(s.Adapter, ".py") && !filepath.IsAbs(s.Adapter) {
		// go test runs in the package's folder: a relative path may be the
		// user's, from the repository's root
		tried := []string{s.Adapter}
		if dir, err := FindDir(); err == nil {
			tried = append(tried, filepath.Join(dir, "..", "..", s.Adapter))
		}
		found := false
		for _, p := range tried {
			if _, err := os.Stat(p); err == nil {
				s.Adapter, _ = filepath.Abs(p)
				found = true
				break
			}
		}
		if !found {
			return s, true, fmt.Errorf("bridge: SSMK_BRIDGE adapter %s: no such file (tried %s)", s.Adapter, strings.Join(tried, ", "))
		}
	}
	return s, true, nil
}

// NoWorker begins what a bridged suite prints when it skips because no
// worker could start for the suite's own numpy path (no python3 with
// NumPy); NoWorkerLine finds that line in a suite's output, for the
// runners that must report the suite as not run rather than passed.
const NoWorker = "no worker could start"

// NoWorkerLine is the line of out that says no worker could start, or "".
func NoWorkerLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, NoWorker) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// FindPython returns SSMK_PYTHON, else the first of python3 and
// /usr/bin/python3 that imports NumPy (every worker needs it), else
// python3, whose failure to start then names what is missing.
func FindPython() string {
	if p := os.Getenv("SSMK_PYTHON"); p != "" {
		return p
	}
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import numpy").Run() == nil {
			return py
		}
	}
	return "python3"
}

// FindDir returns bridge/python, looked for from the working directory up.
func FindDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "bridge", "python")
		if _, err := os.Stat(filepath.Join(p, "ssmbridge", "worker.py")); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("bridge: bridge/python/ssmbridge not found above the working directory (set SSMK_BRIDGE_DIR)")
		}
		dir = up
	}
}

// Cap is what an adapter declares of one operation.
type Cap struct {
	DTypes      []string `json:"dtypes"`
	StateDTypes []string `json:"state_dtypes"` // "same" (the inputs' type), "f32", …
	Algorithm   string   `json:"algorithm"`    // "chunked" or "sequential"
	ChunkSizes  []int    `json:"chunk_sizes"`  // the chunk sizes it takes; empty: any
	Features    []string `json:"features"`
	// Arithmetic is what a Mamba-3 operation declares of how it computes:
	// its chunk (0: step by step), the type its products' operands are
	// rounded to, and PTX's approximate transcendentals.
	Arithmetic struct {
		Chunk    int    `json:"chunk"`
		Operands string `json:"operands"`
		Approx   bool   `json:"approx"`
	} `json:"arithmetic"`
	// CastsTo is the type the operation's wrapper converts its inputs to
	// on its own ("" when it takes them as given): the suite then judges it
	// on inputs of that type, and says so.
	CastsTo string `json:"casts_to"`
}

// Has reports whether the operation declares a feature.
func (c Cap) Has(f string) bool {
	for _, g := range c.Features {
		if g == f {
			return true
		}
	}
	return false
}

// HasDType reports whether the operation declares a dtype tag.
func (c Cap) HasDType(tag string) bool {
	for _, g := range c.DTypes {
		if g == tag {
			return true
		}
	}
	return false
}

// Hello is what a worker says about itself when it starts.
type Hello struct {
	Protocol     int
	Describe     map[string]any
	Capabilities map[string]Cap
	PID          int
}

// CrashError is a call that ended the worker: it died (a signal, an
// exit), hung past the timeout, or reported a device fault. The next call
// starts a fresh worker.
type CrashError struct {
	Op, Cause string
	Stderr    string // the worker's last words
}

func (e *CrashError) Error() string {
	s := fmt.Sprintf("bridge: the worker crashed in %s: %s", e.Op, e.Cause)
	if e.Stderr != "" {
		s += "\n--- worker stderr (tail) ---\n" + e.Stderr
	}
	return s
}

// KernelError is a call the adapter answered with an error: Kind is
// "unsupported" (the kernel does not take this problem), "invalid" (it
// refused the arguments) or "error" (the adapter or kernel raised).
type KernelError struct {
	Op, Kind, Message, Traceback string
}

func (e *KernelError) Error() string {
	return fmt.Sprintf("bridge: %s: %s: %s", e.Op, e.Kind, e.Message)
}

// Unsupported reports whether err says the kernel does not take a problem.
func Unsupported(err error) bool {
	var k *KernelError
	return errors.As(err, &k) && k.Kind == "unsupported"
}

// Spec is what the worker was started with.
func (w *Worker) Spec() Spec { return w.spec }

// Worker is one worker process, restarted after a crash.
type Worker struct {
	spec     Spec
	mu       sync.Mutex
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	stderr   *tail
	done     chan struct{}
	hello    *Hello
	Restarts int // workers started after the first
	Crashes  int
	calls    atomic.Int64 // Call's, for Calls
}

// tail keeps the last bytes a worker wrote to stderr (and, with echo,
// passes them on).
type tail struct {
	mu   sync.Mutex
	buf  []byte
	echo io.Writer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8192 {
		t.buf = t.buf[len(t.buf)-8192:]
	}
	if t.echo != nil {
		t.echo.Write(p)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// Start starts a worker and reads its hello.
func Start(spec Spec) (*Worker, error) {
	if spec.Python == "" {
		spec.Python = FindPython()
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 600 * time.Second
	}
	if spec.Dir == "" {
		d, err := FindDir()
		if err != nil {
			return nil, err
		}
		spec.Dir = d
	}
	w := &Worker{spec: spec}
	if err := w.start(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Worker) start() error {
	if w.cmd != nil {
		w.Restarts++
	}
	cmd := exec.Command(w.spec.Python, append([]string{"-u", "-m", "ssmbridge.worker", w.spec.Adapter}, w.spec.Args...)...)
	cmd.Dir = w.spec.Dir
	cmd.Env = append(append(os.Environ(), "PYTHONPATH="+w.spec.Dir+string(os.PathListSeparator)+os.Getenv("PYTHONPATH")), w.spec.Env...)
	w.stderr = &tail{}
	if os.Getenv("SSMK_BRIDGE_ECHO") != "" {
		w.stderr.echo = os.Stderr
	}
	cmd.Stderr = w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bridge: starting %s: %v", w.spec.Python, err)
	}
	w.cmd, w.in, w.out, w.done = cmd, in, bufio.NewReaderSize(out, 1<<20), make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(cmd, w.done)
	rep, err := w.roundTrip("hello", header{Kind: "hello"}, nil)
	if err != nil {
		return err
	}
	w.hello = &Hello{Protocol: rep.Protocol, Describe: rep.Describe, Capabilities: rep.Caps, PID: rep.PID}
	if rep.Protocol != 1 {
		return fmt.Errorf("bridge: the worker speaks protocol %d, want 1", rep.Protocol)
	}
	return nil
}

// Hello returns what the worker said when it (last) started.
func (w *Worker) Hello() *Hello { return w.hello }

func (w *Worker) kill() {
	if w.cmd != nil && w.cmd.Process != nil {
		w.cmd.Process.Kill()
		<-w.done
	}
}

// roundTrip sends one message and reads the reply within the timeout; a
// worker that dies, hangs or writes garbage is killed and reported.
func (w *Worker) roundTrip(op string, h header, arrays []Array) (*reply, error) {
	type result struct {
		rep *reply
		err error
	}
	ch := make(chan result, 1)
	go func() {
		if err := writeMessage(w.in, h, arrays); err != nil {
			ch <- result{nil, err}
			return
		}
		rep, err := readMessage(w.out)
		ch <- result{rep, err}
	}()
	crash := func(cause string) error {
		w.kill()
		w.Crashes++
		time.Sleep(10 * time.Millisecond) // the stderr copier's last bytes
		return &CrashError{Op: op, Cause: cause, Stderr: w.stderr.String()}
	}
	select {
	case r := <-ch:
		if r.err != nil {
			<-time.After(50 * time.Millisecond)
			cause := r.err.Error()
			if errors.Is(r.err, io.EOF) || errors.Is(r.err, io.ErrUnexpectedEOF) || strings.Contains(cause, "broken pipe") {
				select {
				case <-w.done:
					cause = "the worker exited: " + w.cmd.ProcessState.String()
				case <-time.After(2 * time.Second):
					cause = "the worker closed its pipe"
				}
			}
			return nil, crash(cause)
		}
		if r.rep.Error != "" {
			if r.rep.Kind == "fault" {
				return nil, crash("device fault: " + r.rep.Error)
			}
			return nil, &KernelError{Op: op, Kind: r.rep.Kind, Message: r.rep.Error, Traceback: r.rep.Traceback}
		}
		return r.rep, nil
	case <-time.After(w.spec.Timeout):
		return nil, crash(fmt.Sprintf("no answer within %v (killed)", w.spec.Timeout))
	}
}

// Call runs an operation of the adapter (kind "call") or times it
// ("time"). After a crash the worker is restarted first.
func (w *Worker) Call(kind, op string, params map[string]any, arrays []Array) (*reply, error) {
	w.calls.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.done:
		if err := w.start(); err != nil {
			return nil, fmt.Errorf("bridge: restarting the worker after a crash: %w", err)
		}
	default:
	}
	return w.roundTrip(op, header{Kind: kind, Op: op, Params: params}, arrays)
}

// Calls is how many calls and timings the worker has been asked for.
func (w *Worker) Calls() int64 { return w.calls.Load() }

// Close ends the worker.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	default:
	}
	writeMessage(w.in, header{Kind: "exit"}, nil)
	w.in.Close()
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		w.kill()
	}
	return nil
}
