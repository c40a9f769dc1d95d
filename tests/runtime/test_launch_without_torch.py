"""`accel-launch` on a machine without torch: one line saying what to install, no traceback."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter where `import torch` fails, as on a machine with only the migrator installed.
_WITHOUT_TORCH = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None
    sys.argv = ["accel-launch", "train.py"]
    from runtime.launch.cli import main
    main()
    """
)


def test_launcher_without_torch_names_the_extra_to_install():
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TORCH], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "torch is not installed" in result.stderr and "accel-migrate[runtime]" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_importing_the_runtime_package_does_not_import_torch():
    code = "import sys, runtime.launch.cli; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr
