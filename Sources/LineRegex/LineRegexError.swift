/// A pattern rejected by `LineRegex.init`; `description` is meant to be shown to API clients as-is.
///
/// Wording follows Go's `regexp/syntax` errors (e.g. `missing closing ): "(ab"`), plus
/// explicit messages for PCRE-only features that RE2 syntax deliberately leaves out.
public struct LineRegexError: Error, Equatable, CustomStringConvertible {
    /// Human-readable message, optionally followed by the offending part of the pattern in quotes.
    public var description: String
    /// Byte offset into the pattern's UTF-8 where the problem was detected, when known.
    public var offset: Int?

    /// Creates an error with a full message and an optional byte offset.
    public init(description: String, offset: Int? = nil) {
        self.description = description
        self.offset = offset
    }

    static func make(_ code: String, _ fragment: [UInt8]? = nil, offset: Int? = nil) -> LineRegexError {
        guard let fragment else { return LineRegexError(description: code, offset: offset) }
        let text = String(decoding: fragment, as: UTF8.self)
        return LineRegexError(description: "\(code): \"\(text)\"", offset: offset)
    }
}
