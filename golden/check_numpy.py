#!/usr/bin/env python3
"""Loads every golden case with NumPy, as a NumPy or PyTorch user would, and
checks each file's sha256 and shape against manifest.json.

    python3 golden/check_numpy.py [golden-folder]
"""
import hashlib
import json
import os
import sys

import numpy as np

root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
manifest = json.load(open(os.path.join(root, "manifest.json")))
assert manifest["schema"] == "ssmverify.golden/v1", manifest["schema"]
files = 0
for case in manifest["cases"]:
    for name, f in case["files"].items():
        path = os.path.join(root, f["file"])
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        assert digest == f["sha256"], f"{path}: sha256 {digest}, manifest {f['sha256']}"
        a = np.load(path)
        assert a.dtype == np.float64 and a.dtype.byteorder in "<=", f"{path}: dtype {a.dtype}"
        assert list(a.shape) == f["shape"], f"{path}: shape {a.shape}, manifest {f['shape']}"
        assert a.flags["C_CONTIGUOUS"], path
        files += 1
print(f"numpy {np.__version__}: {len(manifest['cases'])} golden cases, {files} files load with the manifest's shapes and checksums")
