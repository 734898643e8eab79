extension JSONValue {
    /// The member Go's decoder would store into struct field `field`: keys match exactly or
    /// by Go's case fold (which also maps `ſ` to `S` and the Kelvin sign to `K`), and the last
    /// match in the document wins. Nil for other kinds or no match.
    public func goField(_ field: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        let folded = goFoldName(field)
        return members.last { $0.0 == field || goFoldName($0.0) == folded }?.1
    }
}

/// Go's `foldName` restricted to what can equal an ASCII field name: ASCII letters upper
/// case, `ſ` as `S`, the Kelvin sign as `K`.
public func goFoldName(_ name: String) -> String {
    var out = String.UnicodeScalarView()
    for scalar in name.unicodeScalars {
        switch scalar.value {
        case 0x61...0x7A: out.append(Unicode.Scalar(scalar.value - 0x20)!)
        case 0x17F: out.append("S")
        case 0x212A: out.append("K")
        default: out.append(scalar)
        }
    }
    return String(out)
}
