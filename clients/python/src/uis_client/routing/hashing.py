"""The rendezvous hash of ``packages/routing/src/hash.ts``, bit for bit: 64-bit FNV-1a over UTF-16 code units in
two 32-bit halves (with the carry exactly as the JavaScript computes it) and murmur3's finalizer."""

from __future__ import annotations

_M32 = 0xFFFFFFFF


def _imul(a: int, b: int) -> int:
    return ((a & _M32) * (b & _M32)) & _M32


def _int32(x: int) -> int:
    x &= _M32
    return x - 0x100000000 if x & 0x80000000 else x


def fnv1a64(text: str) -> tuple[int, int]:
    """(hi, lo) of the hash. ``lo ^ unit`` is a signed 32-bit value in JavaScript, and the carry into ``hi`` is
    taken from its (possibly negative) product; this keeps that arithmetic."""
    hi, lo = 0xCBF29CE4, 0x84222325
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        unit = data[i] | (data[i + 1] << 8)
        lo_s = _int32(lo ^ unit)
        lo_mul = lo_s * 0x1B3
        carry = lo_mul // 0x100000000
        new_lo = lo_mul & _M32
        hi = (_imul(hi, 0x1B3) + _imul(lo_s, 0x100) + carry) & _M32
        lo = new_lo
    return hi, lo


def _fmix32(h: int) -> int:
    x = (h ^ (h >> 16)) & _M32
    x = _imul(x, 0x85EBCA6B)
    x ^= x >> 13
    x = _imul(x, 0xC2B2AE35)
    x ^= x >> 16
    return x & _M32


def rendezvous_weight(key: tuple[int, int], replica: tuple[int, int]) -> int:
    """Weight of (key, replica), a non-negative integer below 2**53."""
    key_hi, key_lo = key
    rep_hi, rep_lo = replica
    a = _fmix32(key_lo ^ _imul(rep_hi, 0x9E3779B1))
    b = _fmix32(key_hi ^ rep_lo ^ _imul(a, 0x85EBCA77))
    c = _fmix32(a ^ _imul(b, 0xC2B2AE3D))
    return (b & 0x1FFFFF) * 0x100000000 + c
