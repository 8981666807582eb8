"""Atomic field actions for ``update_with_action`` and action sequences.

=========  ==============================================================
increment  number += value (default 1); a missing field counts as 0
decrement  number -= value (default 1)
multiply   number *= value;  divide: number /= value (integers stay
           integers only when the division is exact); modulo: number %= value
push       append value to an array (a missing field becomes ``[value]``)
pop        remove the last element of an array;  shift: remove the first
unshift    insert value at the front of an array
remove     remove every element equal to value from an array or set
append     string concatenation (or push, for an array)
clear      empty the field keeping its type: ``[]``, ``""``, ``{}``, ``set()``, 0
=========  ==============================================================

Every action raises :class:`tuffdb.errors.IntegrityError` when the field has the wrong
type, and :class:`tuffdb.errors.ProtocolError` for an unknown action name.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tuffdb.documents.values import Number, order_key
from tuffdb.errors import IntegrityError, ProtocolError

ACTIONS = ("increment", "decrement", "multiply", "divide", "modulo", "push", "pop", "shift",
           "unshift", "remove", "append", "clear")
_NUMERIC = (int, float, Decimal)


def _num(value: Any, field: str, what: str) -> Any:
    if isinstance(value, Number):
        return value.value
    if isinstance(value, bool) or not isinstance(value, _NUMERIC):
        raise IntegrityError(f"{what} on '{field}' needs a number, got {value!r}", condition=field)
    return value


def apply_action(record: dict[str, Any], action: str, field: str, value: Any = None) -> None:  # noqa: C901, PLR0912, PLR0915 - type or option dispatch, one case each
    """Apply one action to ``record`` in place."""
    name = action.lower() if isinstance(action, str) else action
    if name not in ACTIONS:
        raise ProtocolError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    if field == "id":
        raise IntegrityError("the id field cannot be changed", condition=field)
    cur = record.get(field)
    if name in ("increment", "decrement", "multiply", "divide", "modulo"):
        amount = 1 if value is None and name in ("increment", "decrement") else value
        a = _num(0 if cur is None else cur, field, name)
        b = _num(amount, field, name)
        if isinstance(a, Decimal) or isinstance(b, Decimal):
            a, b = Decimal(str(a)), Decimal(str(b))
        try:
            if name == "increment":
                out = a + b
            elif name == "decrement":
                out = a - b
            elif name == "multiply":
                out = a * b
            elif name == "modulo":
                out = a % b
            elif type(a) is int and type(b) is int and a % b == 0:
                out = a // b
            else:
                out = a / b
        except ZeroDivisionError:
            raise IntegrityError(f"{name} on '{field}' by zero", condition=field) from None
        record[field] = Number(out) if isinstance(cur, Number) else out
        return
    if name == "clear":
        record[field] = type(cur)() if isinstance(cur, (list, str, dict, set, int, float)) else None
        return
    if name == "append" and isinstance(cur, str):
        if not isinstance(value, str):
            raise IntegrityError(f"append to string '{field}' needs a string", condition=field)
        record[field] = cur + value
        return
    if cur is None and name in ("push", "append", "unshift"):
        cur = []
    if name == "remove" and isinstance(cur, (set, frozenset)):
        k = order_key(value)
        record[field] = {x for x in cur if order_key(x) != k}
        return
    if not isinstance(cur, list):
        raise IntegrityError(f"{name} on '{field}' needs an array", condition=field)
    if name in ("push", "append"):
        record[field] = [*cur, value]
    elif name == "unshift":
        record[field] = [value, *cur]
    elif name == "pop":
        record[field] = cur[:-1]
    elif name == "shift":
        record[field] = cur[1:]
    else:  # remove
        k = order_key(value)
        record[field] = [x for x in cur if order_key(x) != k]
