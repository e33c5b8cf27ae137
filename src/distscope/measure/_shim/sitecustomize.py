"""Loaded by every Python process started under `distscope measure log` or `distscope trace capture`
(this folder is put first on PYTHONPATH). In torchrun workers (RANK set) it switches the CommLogger on
(measure log) or starts the step capture (trace capture); everywhere else it does nothing. Another
sitecustomize further down sys.path is still executed."""

import importlib.util
import os
import sys

if os.environ.get("DISTSCOPE_COMMLOG_DIR") and "RANK" in os.environ:
    from distscope.measure.autolog import install

    install()
if os.environ.get("DISTSCOPE_CAPTURE_DIR") and "RANK" in os.environ:
    from distscope.trace.recorder import install as install_capture

    install_capture()

_here = os.path.dirname(os.path.abspath(__file__))
for _p in sys.path:
    if _p and os.path.abspath(_p) != _here and os.path.exists(os.path.join(_p, "sitecustomize.py")):
        _spec = importlib.util.spec_from_file_location(
            "_distscope_next_sitecustomize", os.path.join(_p, "sitecustomize.py")
        )
        if _spec is not None and _spec.loader is not None:
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
