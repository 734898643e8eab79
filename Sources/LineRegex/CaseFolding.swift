/// Unicode simple case-folding orbits, derived once from the standard library's case mappings.
///
/// Two scalars are case-equivalent when `lower(upper(x))` agrees, using only single-scalar
/// mappings (so `ß` does not fold to `ss`, but `K` / `k` / U+212A KELVIN SIGN share an orbit).
enum CaseFolding {
    /// Orbit (all case variants, sorted, including the scalar itself) for every scalar that has one.
    static let orbits: [UInt32: [UInt32]] = buildOrbits()
    /// Every scalar with a non-trivial orbit, sorted ascending.
    static let foldableScalars: [UInt32] = orbits.keys.sorted()

    /// The orbit of `scalar` (nil when it has no other case variants).
    static func orbit(_ scalar: UInt32) -> [UInt32]? {
        orbits[scalar]
    }

    private static func single(_ string: String) -> UInt32? {
        var iterator = string.unicodeScalars.makeIterator()
        guard let first = iterator.next(), iterator.next() == nil else { return nil }
        return first.value
    }

    private static func canonical(_ scalar: Unicode.Scalar) -> UInt32 {
        let upper = single(scalar.properties.uppercaseMapping) ?? scalar.value
        guard let upperScalar = Unicode.Scalar(upper) else { return scalar.value }
        return single(upperScalar.properties.lowercaseMapping) ?? upper
    }

    private static func buildOrbits() -> [UInt32: [UInt32]] {
        var groups: [UInt32: [UInt32]] = [:]
        var value: UInt32 = 0
        // All cased scripts live below U+20000.
        while value < 0x2_0000 {
            defer { value += 1 }
            // U+0131 (dotless ı) only folds to I under Turkic rules, which Go and RE2 do not apply.
            guard value != 0x131, let scalar = Unicode.Scalar(value), scalar.properties.changesWhenCaseMapped else { continue }
            let key = canonical(scalar)
            groups[key, default: []].append(value)
        }
        var result: [UInt32: [UInt32]] = [:]
        for (key, var members) in groups {
            if !members.contains(key) { members.append(key) }
            guard members.count > 1 else { continue }
            members.sort()
            for member in members { result[member] = members }
        }
        return result
    }
}
