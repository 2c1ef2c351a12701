"""The measurement scripts' check for PyTorch, before they import it.

On a machine without PyTorch (where one often reads how to run a script) `--help` prints the
script's usage, and anything else exits naming what the script needs, instead of a traceback.
"""
import importlib.util
import sys


def exit_without_torch(usage: str, script: str, needs: str) -> None:
    """Returns when PyTorch can be imported; otherwise prints `usage` for --help or exits."""
    if importlib.util.find_spec("torch") is not None:
        return
    if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
        print(usage)
        sys.exit(0)
    sys.exit(f"{script} needs {needs}: no module named 'torch'")
