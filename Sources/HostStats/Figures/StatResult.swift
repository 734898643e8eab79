/// The binary prefix a figure is shown in (`--prefix Ki|Mi|Gi|Ti`); text only, JSON keeps bytes.
public enum StatPrefix: String, Sendable, CaseIterable {
    case none = ""
    case kibi = "Ki"
    case mebi = "Mi"
    case gibi = "Gi"
    case tebi = "Ti"

    /// clistat's `ParsePrefix`: exact `Ki Mi Gi Ti`, anything else none.
    public init(parsing text: String) {
        self = StatPrefix(rawValue: text) ?? .none
    }

    /// What the figure is divided by for text.
    public var scale: Double {
        switch self {
        case .none: 1
        case .kibi: 1024
        case .mebi: 1024 * 1024
        case .gibi: 1024 * 1024 * 1024
        case .tebi: 1024 * 1024 * 1024 * 1024
        }
    }
}

/// One figure (clistat's `Result`): what is used, of what total (nil: no limit), in cores
/// or bytes, and the prefix its text is shown in.
public struct StatResult: Equatable, Sendable {
    public var total: Double?
    public var unit: String
    public var used: Double
    public var prefix: StatPrefix

    public init(total: Double?, unit: String, used: Double, prefix: StatPrefix = .none) {
        self.total = total
        self.unit = unit
        self.used = used
        self.prefix = prefix
    }

    /// The text form: `0.523/4 cores (13%)`, `1.23/7.77 GiB (16%)`, `1.23 GiB`.
    public var text: String {
        var out = Self.humanize(used / prefix.scale)
        if let total { out += "/" + Self.humanize(total / prefix.scale) }
        out += " " + prefix.rawValue + unit
        if let total, total > 0 { out += " (" + GoFloat.whole(used / total * 100) + "%)" }
        return GoText.string(GoText.trimSpace(Array(out.utf8)[...]))
    }

    /// The text of an optional figure: `-` when there is none.
    public static func text(_ result: StatResult?) -> String { result?.text ?? "-" }

    /// `json.MarshalIndent` of the figure at `depth` levels of two-space indent, or the
    /// value Go refuses (NaN, an infinity).
    public func json(depth: Int = 0) -> Result<String, StatError> {
        // Go checks the fields in order: total, then used.
        for value in [total, used].compactMap({ $0 }) where !value.isFinite {
            return .failure(StatError("json: unsupported value: \(GoFloat.special(value))"))
        }
        let inner = String(repeating: "  ", count: depth + 1)
        let fields = [
            inner + "\"total\": " + (total.flatMap(GoFloat.json) ?? "null"),
            inner + "\"unit\": \"" + unit + "\"",
            inner + "\"used\": " + (GoFloat.json(used) ?? "null"),
        ]
        return .success("{\n" + fields.joined(separator: ",\n") + "\n" + String(repeating: "  ", count: depth) + "}")
    }

    /// The JSON of an optional figure (`null` when there is none).
    public static func json(_ result: StatResult?, depth: Int = 0) -> Result<String, StatError> {
        guard let result else { return .success("null") }
        return result.json(depth: depth)
    }

    /// clistat's `humanizeFloat`: 3 decimals below 1, 2 below 10, 1 below 100, else none;
    /// trailing zeros dropped.
    static func humanize(_ value: Double) -> String {
        let magnitude = abs(value)
        let scale: Double = magnitude == 0 ? 1 : magnitude < 1 ? 1000 : magnitude < 10 ? 100 : magnitude < 100 ? 10 : 1
        return GoFloat.fixed((value * scale).rounded() / scale)
    }
}
