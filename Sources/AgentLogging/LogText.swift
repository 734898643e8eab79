import Logging

/// Control characters in what is logged as text, escaped (`\n`, `\r`, `\t` and `\x..`), so a
/// value from outside (an app status message, a path, a command) cannot begin a line of its
/// own in the log or its file. JSON lines escape them already.
enum LogText {
    static func escape(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func escape(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let text): .string(escape(text))
        case .stringConvertible(let item): .string(escape(item.description))
        case .array(let items): .array(items.map(escape))
        case .dictionary(let items): .dictionary(items.mapValues(escape))
        }
    }

    /// `event` with its message and metadata escaped.
    static func escape(_ event: LogEvent) -> LogEvent {
        var copy = event
        copy.message = Logger.Message(stringLiteral: escape(event.message.description))
        copy.metadata = event.metadata?.mapValues(escape)
        return copy
    }
}
