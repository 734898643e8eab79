import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// What a login shell in a terminal shows before its shell runs, as the reference shows it:
/// first each enabled announcement banner with a message (trimmed, then a blank line), then
/// the manifest's message of the day unless `~/.hushlogin` exists; every line ends in CR LF
/// (the terminal is raw until the shell sets it up).
enum LoginGreeting {
    /// Bytes of the message-of-the-day file read at most.
    static let maxMOTDBytes = 64 << 10

    /// The greeting's text ("" when there is nothing to show).
    static func text(banners: [AnnouncementBanner], motd: String?) -> String {
        var out = ""
        for banner in banners where banner.enabled {
            let message = banner.message.goTrimmed
            guard !message.isEmpty else { continue }
            out += crlfLines(message) + "\r\n"
        }
        if let motd { out += crlfLines(motd) }
        return out
    }

    /// The message of the day in `file` ("" for none), unless `home` holds `.hushlogin`; nil
    /// when there is nothing to show (a missing file shows nothing).
    static func motd(file: String, home: String) -> String? {
        guard !file.isEmpty, access(home + "/.hushlogin", F_OK) != 0 else { return nil }
        guard let bytes = AtomicFile.read(file, maxBytes: maxMOTDBytes) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text`'s lines, each ending in CR LF (a final line break adds no empty line; a line
    /// already ending in CR keeps one).
    static func crlfLines(_ text: String) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines.map { $0 + "\r\n" }.joined()
    }
}
