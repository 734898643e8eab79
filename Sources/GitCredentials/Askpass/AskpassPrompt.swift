import AgentJSON

/// git's credential prompt (`Username for 'https://github.com': `) as the reference reads it:
/// whether a run of the binary is git asking, and the user and origin the prompt names.
public struct AskpassPrompt: Sendable, Equatable {
    /// The user in the prompt's URL (`https://alice@host`), "" when none.
    public var user: String
    /// The URL without user and path: `https://github.com`, `http://127.0.0.1:8080`.
    public var host: String

    /// A prompt longer than this is refused (git's are one URL long).
    public static let maxBytes = 16 << 10

    public init(user: String, host: String) {
        self.user = user
        self.host = host
    }

    /// True when the binary runs as git's `GIT_ASKPASS`: exactly one argument that begins
    /// `Username ` or `Password `, and `GIT_PREFIX` in the environment (git sets it).
    public static func isAskpass(arguments: [String], environmentNames: some Sequence<String>) -> Bool {
        guard arguments.count == 1, arguments[0].hasPrefix("Username ") || arguments[0].hasPrefix("Password ") else { return false }
        return environmentNames.contains("GIT_PREFIX")
    }

    /// Parses a prompt: at least three words, the first `Username` or `Password`, the third
    /// stripped of leading quotes and trailing quotes and colons, an http(s) URL with a host.
    public static func parse(_ prompt: String) throws(AskpassPromptError) -> AskpassPrompt {
        guard prompt.utf8.count <= maxBytes else { throw AskpassPromptError("askpass prompt is longer than \(maxBytes >> 10) KiB") }
        let words = prompt.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\u{0B}" || $0 == "\u{0C}" })
        guard words.count >= 3 else {
            throw AskpassPromptError("askpass prompt must contain 3 words; got \(words.count): \(goQuote(prompt))")
        }
        guard words[0] == "Username" || words[0] == "Password" else {
            throw AskpassPromptError("unknown prompt type: \(goQuote(prompt))")
        }
        var text = Substring(words[2])
        while let first = text.first, first == "\"" || first == "'" { text.removeFirst() }
        while let last = text.last, last == "\"" || last == "'" || last == ":" { text.removeLast() }
        return try parseURL(String(text))
    }

    /// `scheme://[user[:password]@]host[:port][/path]` → the user and `scheme://host[:port]`.
    static func parseURL(_ text: String) throws(AskpassPromptError) -> AskpassPrompt {
        guard let colon = text.firstIndex(of: ":") else { throw AskpassPromptError("unsupported scheme: \"\"") }
        let scheme = text[..<colon].lowercased()
        guard scheme == "http" || scheme == "https" else { throw AskpassPromptError("unsupported scheme: \(goQuote(String(text[..<colon])))") }
        let rest = text[text.index(after: colon)...]
        guard rest.hasPrefix("//") else { throw AskpassPromptError("host is empty") }
        var authority = rest.dropFirst(2)
        var path = Substring("")
        if let end = authority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            path = authority[end...]
            authority = authority[..<end]
        }
        var user = ""
        if let at = authority.lastIndex(of: "@") {
            let info = authority[..<at]
            let name = info.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            user = percentDecoded(String(name))
            authority = authority[authority.index(after: at)...]
        }
        guard !authority.isEmpty else { throw AskpassPromptError("host is empty") }
        guard !authority.contains(where: { $0 == " " || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } ?? false }) else {
            throw AskpassPromptError("parse host failed: invalid character in host")
        }
        // Go's url.String keeps the path; git's prompt for HTTP never has one.
        return AskpassPrompt(user: user, host: String(scheme) + "://" + String(authority) + String(path))
    }

    static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
                let high = hexValue(utf8[utf8.startIndex]), let low = hexValue(utf8[utf8.startIndex + 1])
            {
                bytes.append(high << 4 | low)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Why a prompt could not be read (the reference's words).
public struct AskpassPromptError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
