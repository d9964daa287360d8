"""ptogym: fused PyPTO operators, the interpreter that runs them, and the tools around them."""
from .workflow.probe import probe

__all__ = ["probe"]
