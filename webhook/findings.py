"""What a validation rule found: problems (deny) and warnings (allow, but tell the user)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyextender.api.volcano.codec import Problem


@dataclass(slots=True)
class Findings:
    problems: list[Problem] = field(default_factory=list)
    """(field path, message); any problem denies the request."""
    warnings: list[str] = field(default_factory=list)
    """Shown by kubectl as ``Warning: ...``; the request is still allowed."""

    def problem(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def describe(problems: list[Problem]) -> str:
    """``path: message; path: message`` (the shape FieldError uses)."""
    return "; ".join(f"{p}: {m}" if p else m for p, m in problems)
