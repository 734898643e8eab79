import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes

/// The chat a request speaks for (headers `Coder-Chat-Id` and `Coder-Ancestor-Chat-Ids`).
public struct ChatIdentity: Sendable, Equatable {
    public static let chatIDHeader = HTTPField.Name("Coder-Chat-Id")!
    public static let ancestorChatIDsHeader = HTTPField.Name("Coder-Ancestor-Chat-Ids")!

    /// Canonical lowercase UUID.
    public let id: String
    /// Ancestor chats, canonical; invalid entries are skipped as the reference does.
    public let ancestorIDs: [String]

    /// Reads the chat headers. No header (or an empty one) means "no chat".
    ///
    /// Unlike the reference, a header that is present but not a UUID is an error rather
    /// than silently disabling isolation.
    public static func from(_ headers: HTTPFields) throws(InvalidChatID) -> ChatIdentity? {
        guard let raw = headers[chatIDHeader], !raw.isEmpty else { return nil }
        guard let id = canonicalUUID(raw) else { throw InvalidChatID(value: raw) }
        var ancestors: [String] = []
        if let rawAncestors = headers[ancestorChatIDsHeader], !rawAncestors.isEmpty,
            let items = (try? JSONValue.parseFirst(Array(rawAncestors.utf8)))?.arrayValue
        {
            for item in items { if let s = item.stringValue, let a = canonicalUUID(s) { ancestors.append(a) } }
        }
        return ChatIdentity(id: id, ancestorIDs: ancestors)
    }

    /// Accepts the forms Go's `uuid.Parse` does: plain, `{...}`, `urn:uuid:...`, or 32 hex digits.
    public static func canonicalUUID(_ text: String) -> String? {
        var s = Substring(text)
        if s.count == 45, s.lowercased().hasPrefix("urn:uuid:") { s = s.dropFirst(9) }
        if s.count == 38, s.first == "{", s.last == "}" { s = s.dropFirst().dropLast() }
        let hex: [Character]
        if s.count == 36 {
            let chars = Array(s)
            for i in [8, 13, 18, 23] where chars[i] != "-" { return nil }
            hex = chars.enumerated().filter { ![8, 13, 18, 23].contains($0.offset) }.map(\.element)
        } else if s.count == 32 {
            hex = Array(s)
        } else {
            return nil
        }
        guard hex.allSatisfy(\.isHexDigit), hex.allSatisfy(\.isASCII) else { return nil }
        let h = String(hex).lowercased()
        let parts = [h.prefix(8), h.dropFirst(8).prefix(4), h.dropFirst(12).prefix(4), h.dropFirst(16).prefix(4), h.dropFirst(20)]
        return parts.joined(separator: "-")
    }
}

/// A `Coder-Chat-Id` header that is not a UUID.
public struct InvalidChatID: Error, Equatable {
    public let value: String
}
