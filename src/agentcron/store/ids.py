"""Ids: sortable and collision-free ULIDs, made cheaply (a fire needs four)."""

from __future__ import annotations

import os
import threading
import time

# Crockford's base32, as the ULID spec writes it; two characters (10 bits) per table entry.
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = tuple(a + b for a in _ALPHABET for b in _ALPHABET)
_SHIFTS = tuple(range(120, -1, -10))  # 13 chunks of 10 bits: the 26 characters of 128 bits
_RANDOM_BITS = 80
_RANDOM_LIMIT = 1 << _RANDOM_BITS

_lock = threading.Lock()
_last_ms = -1
_last_random = 0
_POOL_BYTES = 4096  # random bytes read at once: one getrandom call per ~400 milliseconds used
_pool = b""
_pool_at = 0


def _random80() -> int:
    """80 random bits from the operating system's generator (read in blocks: a call per id
    costs more than the rest of the id). Called with `_lock` held.
    """
    global _pool, _pool_at
    if _pool_at + 10 > len(_pool):
        _pool, _pool_at = os.urandom(_POOL_BYTES), 0
    start, _pool_at = _pool_at, _pool_at + 10
    return int.from_bytes(_pool[start:_pool_at], "big")


def new_id() -> str:
    """A new ULID string: 26 characters, sorting by creation time (milliseconds, then order
    of creation in this process: the spec's monotonic mode).

    Each millisecond starts from 80 fresh random bits; later ids of the same millisecond add
    one, so ids made here never repeat and sort in the order they were made, even when the
    wall clock steps back. python-ulid's `ULID()` costs ~10x this, and the hot path makes
    four ids per fire.
    """
    global _last_ms, _last_random
    ms = time.time_ns() // 1_000_000
    with _lock:
        if ms > _last_ms:
            _last_ms, _last_random = ms, _random80()
        else:
            _last_random += 1
            if _last_random >= _RANDOM_LIMIT:  # 2**80 ids in one millisecond: the next one
                _last_ms, _last_random = _last_ms + 1, _random80()
        value = (_last_ms << _RANDOM_BITS) | _last_random
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def _forget() -> None:
    """In a forked child: nothing of the parent's randomness is used again (its ids would
    repeat the parent's).
    """
    global _pool, _pool_at, _last_ms, _lock
    _lock = threading.Lock()
    _pool, _pool_at, _last_ms = b"", 0, -1


os.register_at_fork(after_in_child=_forget)
