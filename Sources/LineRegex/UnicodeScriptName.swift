/// `\p{Name}` for a Unicode script (`\p{Greek}`, `\p{Han}`), by the long names Go's regexp
/// takes (`unicode.Scripts`), from ``UnicodeScriptTable``.
enum UnicodeScriptName {
    /// The script's ranges as pairs of first and last code point; nil for a name that is no
    /// script.
    static func ranges(named name: String) -> [UInt32]? {
        let names = UnicodeScriptTable.names
        var low = 0
        var high = names.count
        while low < high {
            let middle = (low + high) / 2
            if names[middle] < name { low = middle + 1 } else { high = middle }
        }
        guard low < names.count, names[low] == name else { return nil }
        return Array(UnicodeScriptTable.ranges[UnicodeScriptTable.offsets[low]..<UnicodeScriptTable.offsets[low + 1]])
    }
}
