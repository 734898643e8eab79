/// `\p{Name}` for a Unicode script (`\p{Greek}`, `\p{Han}`), by the long names Go's regexp
/// takes (`unicode.Scripts`), from ``UnicodeScriptTable``.
enum UnicodeScriptName {
    /// The script's ranges as pairs of first and last code point; nil for a name that is no
    /// script. (Looked up once per `\p` as a pattern is parsed, never while matching.)
    static func ranges(named name: String) -> [UInt32]? {
        guard let index = UnicodeScriptTable.names.firstIndex(of: name) else { return nil }
        return Array(UnicodeScriptTable.ranges[UnicodeScriptTable.offsets[index]..<UnicodeScriptTable.offsets[index + 1]])
    }
}
