"""Kubernetes resource quantities ("500m", "1Gi", "2") as integers.

CPU is kept in milli-cores and everything else in base units (bytes, counts),
so all arithmetic in the scheduler is exact integer arithmetic.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_PATTERN = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


MAX_AMOUNT = 2**63 - 1
"""Largest amount a column holds (numpy int64); Kubernetes caps quantities the same way."""


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or one too large to hold."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity into an exact Decimal in base units."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or number, got {value!r}")
    if isinstance(value, int | float):
        exact = Decimal(str(value))
        if not exact.is_finite():
            raise QuantityError(f"invalid quantity {value!r}: not a finite number")
        return exact
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string or number, got {type(value).__name__}")
    match = _PATTERN.match(value.strip())
    if match is None:
        raise QuantityError(f"invalid quantity {value!r}")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as exc:
        raise QuantityError(f"invalid quantity {value!r}") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix]


def _bounded(value: str | int | float, scaled: Decimal, unit: str) -> int:
    n = int(scaled.to_integral_value(rounding="ROUND_CEILING"))
    if abs(n) > MAX_AMOUNT:
        raise QuantityError(
            f"quantity {value!r} is too large: in {unit} it exceeds the largest supported "
            f"amount, {MAX_AMOUNT} (2^63-1)"
        )
    return n


def to_milli(value: str | int | float) -> int:
    """Quantity in thousandths, rounded up (as Kubernetes rounds CPU requests)."""
    return _bounded(value, parse_quantity(value) * 1000, "milli-units")


def to_int(value: str | int | float) -> int:
    """Quantity in base units, rounded up."""
    return _bounded(value, parse_quantity(value), "units")
