#!/usr/bin/env python3
"""Recomputes the Secret Service session's known-answer vectors independently of Lockbox and of
the libcrypto it loads, and exits 1 naming any value that differs:

  Sources/LockboxSelfTest/Vectors/hkdf-sha256-rfc5869-and-wycheproof.json
      every okm, with Python's hmac and hashlib (RFC 5869's extract and expand);
  Sources/LockboxSelfTest/Vectors/aes128cbc-sp800-38a-and-wycheproof.json
      every ciphertext and plaintext with the `cryptography` package, and every BadPadding case
      refused by its PKCS#7 unpadder;
  Sources/LockboxSelfTest/Vectors/modp1024-rfc2409.json
      the prime is a safe prime (p and (p - 1) / 2 pass 64 Miller-Rabin rounds) of 1024 bits with
      64 one bits at each end, as RFC 2409 section 6.2 defines it; every public and shared value
      with pow(); every session key with hmac; every refused peer value outside 2 ... p-2.

The vector files name their published sources; this script checks that Lockbox's copies of those
values (and the exchange values computed for it) are right, so the `lockbox selftest` results
mean what they say. Requires python3 and `pip install cryptography` (scripts/ensure-deps.sh
--test installs it).

Usage: scripts/ci/check-session-vectors.py
"""
import hashlib
import hmac
import json
import os
import random
import sys

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(ROOT, "Sources", "LockboxSelfTest", "Vectors")
failures = []


def load(name):
    with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
        document = json.load(f)
    if not document["source"]["name"]:
        failures.append(f"{name}: no source named")
    return document["vectors"]


def expect(condition, message):
    if not condition:
        failures.append(message)


def hkdf_sha256(salt, ikm, info, length):
    prk = hmac.new(salt or b"\0" * 32, ikm, hashlib.sha256).digest()
    okm, block, counter = b"", b"", 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
        counter += 1
    return okm[:length]


def check_hkdf():
    vectors = load("hkdf-sha256-rfc5869-and-wycheproof.json")
    for v in vectors:
        okm = bytes.fromhex(v["okm_hex"])
        got = hkdf_sha256(bytes.fromhex(v["salt_hex"]), bytes.fromhex(v["ikm_hex"]), bytes.fromhex(v["info_hex"]), len(okm))
        expect(got == okm, f"HKDF {v['id']}: computed {got.hex()}")
    return len(vectors)


def check_aes():
    vectors = load("aes128cbc-sp800-38a-and-wycheproof.json")
    for v in vectors:
        key, iv, ciphertext = bytes.fromhex(v["key_hex"]), bytes.fromhex(v["iv_hex"]), bytes.fromhex(v["ciphertext_hex"])
        cipher = Cipher(algorithms.AES(key), modes.CBC(iv))
        decryptor = cipher.decryptor()
        decrypted = decryptor.update(ciphertext) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        if v["expect"] == "reject":
            try:
                unpadder.update(decrypted) + unpadder.finalize()
                failures.append(f"AES {v['id']}: the padding is valid after all")
            except ValueError:
                pass
            continue
        plaintext = bytes.fromhex(v["plaintext_hex"])
        if v["padding"] == "pkcs7":
            padder = padding.PKCS7(128).padder()
            padded = padder.update(plaintext) + padder.finalize()
        else:
            padded = plaintext
        encryptor = cipher.encryptor()
        expect(encryptor.update(padded) + encryptor.finalize() == ciphertext, f"AES {v['id']}: the ciphertext differs")
        expect(decrypted == padded, f"AES {v['id']}: the decrypted plaintext differs")
    return len(vectors)


def probably_prime(n, rounds=64):
    if n % 2 == 0:
        return n == 2
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    rng = random.Random(2409)
    for _ in range(rounds):
        x = pow(rng.randrange(2, n - 1), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def check_modp():
    vectors = load("modp1024-rfc2409.json")
    primes = [v for v in vectors if v["expect"] == "prime"]
    expect(len(primes) == 1, "MODP: exactly one prime vector")
    p = int(primes[0]["prime_hex"], 16)
    expect(primes[0]["generator"] == 2, "MODP: the generator is 2")
    expect(p.bit_length() == 1024, "MODP: the prime has 1024 bits")
    expect(p >> 960 == 2**64 - 1 and p % 2**64 == 2**64 - 1, "MODP: the prime's top and bottom 64 bits are ones (RFC 2409 6.2)")
    expect(probably_prime(p) and probably_prime((p - 1) // 2), "MODP: p is not a safe prime")
    for v in vectors:
        if v["expect"] == "prime":
            continue
        x = int(v["exponent_hex"], 16)
        peer = int(v["peer_public_hex"], 16)
        if v["expect"] == "reject":
            expect(not 2 <= peer <= p - 2, f"MODP {v['id']}: the peer value is usable after all")
            continue
        expect(pow(2, x, p).to_bytes(128, "big").hex() == v["public_hex"], f"MODP {v['id']}: public value")
        shared = pow(peer, x, p).to_bytes(128, "big")
        expect(shared.hex() == v["shared_hex"], f"MODP {v['id']}: shared value")
        expect(hkdf_sha256(b"", shared, b"", 16).hex() == v["session_key_hex"], f"MODP {v['id']}: session key")
    return len(vectors)


def main():
    counts = (check_hkdf(), check_aes(), check_modp())
    if failures:
        sys.exit("check-session-vectors: " + "\n  ".join(failures))
    print(f"check-session-vectors: {counts[0]} HKDF, {counts[1]} AES-CBC and {counts[2]} MODP vectors recomputed independently")


if __name__ == "__main__":
    main()
