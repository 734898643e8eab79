/// A compiled character class: sorted disjoint scalar ranges plus optional Unicode
/// general-category tests, with an ASCII bitmap so the common case is one shift and mask.
struct CharClass: Sendable, Equatable {
    /// Sorted, merged, inclusive ranges stored flat as `[lo0, hi0, lo1, hi1, ...]`.
    private(set) var ranges: [UInt32]
    /// General-category tests: bit `i` of `mask` is `GeneralCategoryName.allCategories[i]`.
    var categories: [CategoryTest]
    /// Apply case folding to category tests at match time (ranges are folded at build time).
    var foldCategories: Bool
    var negated: Bool
    private var asciiLow: UInt64 = 0
    private var asciiHigh: UInt64 = 0

    struct CategoryTest: Sendable, Equatable {
        var mask: UInt32
        var negated: Bool
    }

    init(ranges: [UInt32], categories: [CategoryTest] = [], foldCategories: Bool = false, negated: Bool = false) {
        self.ranges = CharClass.normalize(ranges)
        self.categories = categories
        self.foldCategories = foldCategories
        self.negated = negated
        for c in 0..<UInt32(128) where rawContains(c) {
            if c < 64 { asciiLow |= 1 << UInt64(c) } else { asciiHigh |= 1 << UInt64(c - 64) }
        }
    }

    /// Whether the class matches `scalar` (a value up to 0x10FFFF; U+FFFD stands for invalid bytes).
    @inline(__always)
    func contains(_ scalar: UInt32) -> Bool {
        if scalar < 64 { return asciiLow & (1 << UInt64(scalar)) != 0 }
        if scalar < 128 { return asciiHigh & (1 << UInt64(scalar - 64)) != 0 }
        return rawContains(scalar)
    }

    private func rawContains(_ scalar: UInt32) -> Bool {
        var hit = CharClass.rangesContain(ranges, scalar)
        if !hit && !categories.isEmpty {
            hit = categoryContains(scalar)
            if !hit && foldCategories, let orbit = CaseFolding.orbit(scalar) {
                hit = orbit.contains { categoryContains($0) }
            }
        }
        return hit != negated
    }

    private func categoryContains(_ scalar: UInt32) -> Bool {
        let bit: UInt32
        if let s = Unicode.Scalar(scalar) {
            bit = GeneralCategoryName.bit(of: s.properties.generalCategory)
        } else {
            bit = GeneralCategoryName.surrogateBit
        }
        for test in categories where (test.mask & bit != 0) != test.negated {
            return true
        }
        return false
    }

    /// Sorts and merges overlapping or adjacent ranges.
    static func normalize(_ flat: [UInt32]) -> [UInt32] {
        var pairs: [(UInt32, UInt32)] = []
        pairs.reserveCapacity(flat.count / 2)
        var i = 0
        while i + 1 < flat.count {
            pairs.append((flat[i], flat[i + 1]))
            i += 2
        }
        pairs.sort { $0.0 < $1.0 }
        var out: [UInt32] = []
        out.reserveCapacity(pairs.count * 2)
        for (lo, hi) in pairs {
            if let last = out.last, lo <= last + 1 {
                if hi > last { out[out.count - 1] = hi }
            } else {
                out.append(lo)
                out.append(hi)
            }
        }
        return out
    }

    /// Complement of normalized ranges within 0...0x10FFFF.
    static func complement(_ normalized: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        var next: UInt32 = 0
        var i = 0
        while i + 1 < normalized.count {
            let lo = normalized[i], hi = normalized[i + 1]
            if lo > next { out.append(next); out.append(lo - 1) }
            next = hi + 1
            i += 2
        }
        if next <= 0x10FFFF { out.append(next); out.append(0x10FFFF) }
        return out
    }

    /// Adds every case variant of every scalar in the ranges (simple Unicode folding).
    /// Cost is O(min(class size, number of foldable scalars)), so compiling stays cheap.
    static func fold(_ normalized: [UInt32]) -> [UInt32] {
        var out = normalized
        func addOrbit(_ scalar: UInt32) {
            for member in CaseFolding.orbit(scalar) ?? [] {
                out.append(member)
                out.append(member)
            }
        }
        var size = 0
        var i = 0
        while i + 1 < normalized.count {
            size += Int(normalized[i + 1] - normalized[i]) + 1
            i += 2
        }
        if size <= CaseFolding.foldableScalars.count {
            i = 0
            while i + 1 < normalized.count {
                for scalar in normalized[i]...normalized[i + 1] { addOrbit(scalar) }
                i += 2
            }
        } else {
            for scalar in CaseFolding.foldableScalars where rangesContain(normalized, scalar) {
                addOrbit(scalar)
            }
        }
        return normalize(out)
    }

    /// Binary search in flat sorted ranges.
    @inline(__always)
    static func rangesContain(_ ranges: [UInt32], _ scalar: UInt32) -> Bool {
        var lo = 0
        var hi = ranges.count / 2
        while lo < hi {
            let mid = (lo + hi) / 2
            if scalar < ranges[2 * mid] {
                hi = mid
            } else if scalar > ranges[2 * mid + 1] {
                lo = mid + 1
            } else {
                return true
            }
        }
        return false
    }
}
