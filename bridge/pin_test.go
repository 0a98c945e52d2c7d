package bridge

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPinAutotuners: pin=1 leaves each autotuner of the modules under the
// adapter's package one configuration, the first its own pruning keeps
// for the call, and every other autotuner as it was (a stand-in class for
// Triton's: the machines CI runs on have no Triton).
func TestPinAutotuners(t *testing.T) {
	needPython(t)
	script := `
import sys, types
sys.path.insert(0, "python")
from ssmbridge.upstream import pin_autotuners
class Autotuner:
    def __init__(self, configs, keep=None):
        self.configs, self.keep = configs, keep
    def prune_configs(self, kwargs):
        return [c for c in self.configs if self.keep is None or self.keep(c, kwargs)]
kern = types.ModuleType("pkg.kern")
kern.a, kern.b, kern.n = Autotuner([1, 2, 3], lambda c, kw: c >= kw["lo"]), Autotuner([7]), 5
other = types.ModuleType("pkgother")
other.c = Autotuner([4, 5])
sys.modules.update({"pkg": types.ModuleType("pkg"), "pkg.kern": kern, "pkgother": other})
got = pin_autotuners("pkg", Autotuner)
assert got == ["a"], f"pinned {got}, want the one autotuner of several configurations under pkg"
assert kern.a.prune_configs({"lo": 2}) == [2], kern.a.prune_configs({"lo": 2})
assert kern.a.prune_configs({"lo": 9}) == [], "a pruning that keeps none must keep none"
assert kern.b.prune_configs({}) == [7]
assert other.c.prune_configs({}) == [4, 5], "another package's autotuner was pinned"
assert pin_autotuners("pkg", Autotuner) == ["a"] and kern.a.prune_configs({"lo": 1}) == [1], "pinned twice is not pinned once"
print("pinned")
`
	out, err := exec.Command(FindPython(), "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pinned") {
		t.Fatalf("pin_autotuners: %v\n%s", err, out)
	}
}

// TestConfigs: configs reports the last configuration each autotuner
// under the prefix chose, found again when a module is loaded after the
// first call (stand-in classes, as TestPinAutotuners).
func TestConfigs(t *testing.T) {
	needPython(t)
	script := `
import sys, types
sys.path.insert(0, "python")
from ssmbridge.upstream import configs
class Autotuner:
    def __init__(self):
        self.cache = {}
kern = types.ModuleType("pkg.kern")
kern.a, kern.idle, kern.n = Autotuner(), Autotuner(), 5
other = types.ModuleType("pkgother")
other.c = Autotuner()
other.c.cache[(1,)] = "BLOCK: 8"
sys.modules.update({"pkg": types.ModuleType("pkg"), "pkg.kern": kern, "pkgother": other})
assert configs("pkg.", Autotuner) == {}, configs("pkg.", Autotuner)
kern.a.cache[(1,)], kern.a.cache[(2,)] = "BLOCK: 16", "BLOCK: 32"
assert configs("pkg.", Autotuner) == {"a": "BLOCK: 32"}, configs("pkg.", Autotuner)
late = types.ModuleType("pkg.late")
late.b = Autotuner()
late.b.cache[(3,)] = "BLOCK: 64"
sys.modules["pkg.late"] = late
assert configs("pkg.", Autotuner) == {"a": "BLOCK: 32", "b": "BLOCK: 64"}, "a module loaded later not searched"
print("configs")
`
	out, err := exec.Command(FindPython(), "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configs") {
		t.Fatalf("configs: %v\n%s", err, out)
	}
}
