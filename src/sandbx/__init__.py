"""sandbx: a security-first harness for AI coding agents.

Every command crosses a kernel boundary (Landlock, seccomp, namespaces) that
fails closed. This package root exports nothing but the version, so that
``import sandbx`` stays cheap.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
