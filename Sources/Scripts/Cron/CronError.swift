/// Why a cron spec, a time zone name or a TZif file was refused. The text names the spec
/// (quoted, control characters escaped, long text cut) and the part that is wrong.
public struct CronError: Error, CustomStringConvertible, Equatable {
    public var description: String

    init(_ description: String) {
        self.description = description
    }

    /// `text` in double quotes for an error message: quotes and backslashes escaped, control,
    /// format and separator characters as `\u{…}`, cut after `limit` characters.
    static func quoted(_ text: some StringProtocol, limit: Int = 120) -> String {
        var out = "\""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit {
                out += "…"
                break
            }
            count += 1
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default:
                switch scalar.properties.generalCategory {
                case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                default:
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
