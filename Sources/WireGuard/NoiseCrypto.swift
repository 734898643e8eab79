import CTailnetCrypto

/// WireGuard's primitives (whitepaper §5.4): HASH = BLAKE2s-256, MAC = keyed BLAKE2s-128,
/// HMAC = HMAC-BLAKE2s, KDF1–3 = the HKDF chain over HMAC, AEAD = ChaCha20-Poly1305 with a
/// 4-zero-byte ‖ 64-bit LE counter nonce, DH = X25519. Handshake code, not the hot path.
enum NoiseCrypto {
    /// "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s".
    static let construction = Array("Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s".utf8)
    /// "WireGuard v1 zx2c4 Jason@zx2c4.com".
    static let identifier = Array("WireGuard v1 zx2c4 Jason@zx2c4.com".utf8)
    static let labelMAC1 = Array("mac1----".utf8)
    static let labelCookie = Array("cookie--".utf8)

    /// C0 = HASH(construction).
    static let initialChainKey: Key32 = hash(construction)
    /// H0 = HASH(C0 ‖ identifier).
    static let initialHash: Key32 = hash(initialChainKey.bytes, identifier)

    static func publicKey(of priv: Key32) -> Key32? {
        var pub = Key32()
        let rc = pub.withUnsafeMutableBytes { out in
            priv.withUnsafeBytes { tc_x25519_public(out.u8, $0.u8) }
        }
        return rc == 0 ? pub : nil
    }

    /// DH(priv, pub); nil for a low-order point (an all-zero result).
    static func dh(_ priv: Key32, _ pub: Key32) -> Key32? {
        var shared = Key32()
        let rc = shared.withUnsafeMutableBytes { out in
            priv.withUnsafeBytes { p in pub.withUnsafeBytes { tc_x25519(out.u8, p.u8, $0.u8) } }
        }
        return rc == 0 ? shared : nil
    }

    static func hash(_ a: [UInt8], _ b: [UInt8] = []) -> Key32 {
        var out = Key32()
        let rc = out.withUnsafeMutableBytes { o in
            a.withUnsafeBufferPointer { pa in
                b.withUnsafeBufferPointer { pb in
                    tc_blake2s256(o.u8, pa.baseAddress, pa.count, pb.baseAddress, pb.count, nil, 0)
                }
            }
        }
        precondition(rc == 0, "BLAKE2s failed")
        return out
    }

    /// HASH(h ‖ data).
    static func mixHash(_ h: Key32, _ data: UnsafeRawBufferPointer) -> Key32 {
        var out = Key32()
        let rc = out.withUnsafeMutableBytes { o in
            h.withUnsafeBytes { tc_blake2s256(o.u8, $0.u8, 32, data.u8, data.count, nil, 0) }
        }
        precondition(rc == 0, "BLAKE2s failed")
        return out
    }

    static func mixHash(_ h: Key32, _ data: [UInt8]) -> Key32 {
        data.withUnsafeBytes { mixHash(h, $0) }
    }

    static func mixHash(_ h: Key32, _ key: Key32) -> Key32 {
        key.withUnsafeBytes { mixHash(h, $0) }
    }

    /// MAC(key, data): keyed BLAKE2s with a 16-byte result, written to `out`.
    static func mac(key: Key32, _ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        let rc = key.withUnsafeBytes { tc_blake2s_mac(out.u8, 16, $0.u8, 32, data.u8, data.count) }
        precondition(rc == 0, "BLAKE2s MAC failed")
    }

    /// MAC with a 16-byte key (mac2 under a cookie).
    static func mac(key16: UnsafeRawBufferPointer, _ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        let rc = tc_blake2s_mac(out.u8, 16, key16.u8, 16, data.u8, data.count)
        precondition(rc == 0, "BLAKE2s MAC failed")
    }

    static func hmac(_ key: Key32, _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) -> Key32 {
        var out = Key32()
        let rc = out.withUnsafeMutableBytes { o in
            key.withUnsafeBytes { tc_hmac_blake2s(o.u8, $0.u8, 32, a.u8, a.count, b.u8, b.count) }
        }
        precondition(rc == 0, "HMAC-BLAKE2s failed")
        return out
    }

    /// KDF_n(key, input) for n = 1...3: τ0 = HMAC(key, input), τ1 = HMAC(τ0, 0x1),
    /// τi = HMAC(τ0, τ(i-1) ‖ i).
    static func kdf(_ n: Int, key: Key32, input: UnsafeRawBufferPointer) -> (Key32, Key32, Key32) {
        var t0 = hmac(key, input)
        defer { t0.zeroize() }
        var one: UInt8 = 1
        let t1 = withUnsafeBytes(of: &one) { hmac(t0, $0) }
        guard n > 1 else { return (t1, .zero, .zero) }
        var two: UInt8 = 2
        let t2 = t1.withUnsafeBytes { p in withUnsafeBytes(of: &two) { hmac(t0, p, $0) } }
        guard n > 2 else { return (t1, t2, .zero) }
        var three: UInt8 = 3
        let t3 = t2.withUnsafeBytes { p in withUnsafeBytes(of: &three) { hmac(t0, p, $0) } }
        return (t1, t2, t3)
    }

    static func kdf(_ n: Int, key: Key32, input: Key32) -> (Key32, Key32, Key32) {
        input.withUnsafeBytes { kdf(n, key: key, input: $0) }
    }

    /// AEAD seal with nonce = 4 zero bytes ‖ LE64(counter): `out` takes `plain.count + 16`.
    /// In-place use (`out` over `plain`) is allowed (libsodium supports it).
    @inline(__always)
    static func seal(
        key: Key32, counter: UInt64, plain: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer
    ) {
        var nonce = Nonce12(counter: counter)
        let rc = withUnsafeBytes(of: &nonce) { n in
            key.withUnsafeBytes { k in
                tc_chacha_seal(out.u8, plain.u8, plain.count, ad.u8, ad.count, n.u8, k.u8)
            }
        }
        precondition(rc == 0, "ChaCha20-Poly1305 seal failed")
    }

    /// AEAD open: `cipher` holds the tag last; `out` takes `cipher.count - 16`. False on a
    /// bad tag (or a short input).
    @inline(__always)
    static func open(
        key: Key32, counter: UInt64, cipher: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard cipher.count >= 16 else { return false }
        var nonce = Nonce12(counter: counter)
        let rc = withUnsafeBytes(of: &nonce) { n in
            key.withUnsafeBytes { k in
                tc_chacha_open(out.u8, cipher.u8, cipher.count, ad.u8, ad.count, n.u8, k.u8)
            }
        }
        return rc == 0
    }
}
