/// The model-facing ("declared") screen size and the mapping between it and the desktop's
/// native size.
public struct DisplayGeometry: Sendable, Equatable {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// `c` from a dimension of size `from` to one of size `to`: `(c+0.5)·to/from − 0.5`,
    /// clamped to `[0, to−1]` and rounded; the same size only clamps.
    public static func map(_ c: Int, from: Int, to: Int) -> Int {
        guard from > 0, to > 0 else { return 0 }
        if from == to { return min(max(c, 0), to - 1) }
        let scaled = (Double(c) + 0.5) * Double(to) / Double(from) - 0.5
        let clamped = min(max(scaled, 0), Double(to - 1))
        return Int(clamped.rounded())
    }

    /// A point in `self`'s space mapped into `other`'s.
    public func map(x: Int, y: Int, to other: DisplayGeometry) -> (x: Int, y: Int) {
        (Self.map(x, from: width, to: other.width), Self.map(y, from: height, to: other.height))
    }

    /// The size a model is told to use for a native size (Anthropic's limits: long edge
    /// ≤ 1568, area ≤ 1 150 000): native when it fits; for landscape, width 1280 then 1024
    /// with the height in proportion if that fits; else scaled down by the tighter limit,
    /// truncating, at least 1.
    public static func recommended(forNative native: DisplayGeometry) -> DisplayGeometry {
        let (w, h) = (native.width, native.height)
        let long = max(w, h)
        // Products checked for overflow: this is public and takes any size.
        func area(_ a: Int, _ b: Int) -> Int? {
            let (product, overflow) = a.multipliedReportingOverflow(by: b)
            return overflow ? nil : product
        }
        if long <= 1568, let whole = area(w, h), whole <= 1_150_000 { return native }
        if w >= h, w > 0 {
            for candidate in [1280, 1024] {
                guard let scaled = area(candidate, h) else { continue }
                let height = scaled / w
                if candidate <= 1568 && candidate * height <= 1_150_000 && height > 0 { return DisplayGeometry(width: candidate, height: height) }
            }
        }
        let factor = min(1, 1568 / Double(long), (1_150_000 / (Double(w) * Double(h))).squareRoot())
        return DisplayGeometry(width: max(1, Int(Double(w) * factor)), height: max(1, Int(Double(h) * factor)))
    }
}
